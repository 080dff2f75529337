static char help[] = "Successive assemblies (after PETSc's src/mat/tests/ex236.c): the same pattern with new values, then\n\
a new pattern, then new values again; the first two leave every other row empty (compressed-row storage in\n\
SeqAIJ). After each assembly: MatMult, MatMultTransposeAdd and MatGetDiagonal. Run with -mat_type aij and with\n\
-mat_type aijpredict; both outputs must equal output/assembly.out on 1, 2 or 3 processes.\n\
  -n <N>   global rows (default 10)\n";

#include <petscmat.h>

/* Prints the whole vector on rank 0 (exact: the values are small integers). */
static PetscErrorCode PrintVec(const char *what, Vec v)
{
  Vec                z;
  VecScatter         s;
  const PetscScalar *a;
  PetscInt           n;
  PetscMPIInt        rank;

  PetscFunctionBeginUser;
  PetscCallMPI(MPI_Comm_rank(PetscObjectComm((PetscObject)v), &rank));
  PetscCall(VecScatterCreateToZero(v, &s, &z));
  PetscCall(VecScatterBegin(s, v, z, INSERT_VALUES, SCATTER_FORWARD));
  PetscCall(VecScatterEnd(s, v, z, INSERT_VALUES, SCATTER_FORWARD));
  PetscCall(VecGetLocalSize(z, &n));
  PetscCall(VecGetArrayRead(z, &a));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  %-5s", what));
  if (rank == 0)
    for (PetscInt i = 0; i < n; i++) PetscCall(PetscPrintf(PETSC_COMM_SELF, " %g", (double)PetscRealPart(a[i])));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "\n"));
  PetscCall(VecRestoreArrayRead(z, &a));
  PetscCall(VecScatterDestroy(&s));
  PetscCall(VecDestroy(&z));
  PetscFunctionReturn(PETSC_SUCCESS);
}

int main(int argc, char **argv)
{
  Mat      A;
  Vec      x, y;
  PetscInt N = 10, rstart, rend;
  MatType  type;

  PetscFunctionBeginUser;
  PetscCall(PetscInitialize(&argc, &argv, NULL, help));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-n", &N, NULL));
  PetscCall(MatCreate(PETSC_COMM_WORLD, &A));
  PetscCall(MatSetSizes(A, PETSC_DECIDE, PETSC_DECIDE, N, N));
  PetscCall(MatSetFromOptions(A));
  PetscCall(MatSeqAIJSetPreallocation(A, 3, NULL));
  PetscCall(MatMPIAIJSetPreallocation(A, 3, NULL, 3, NULL));
  PetscCall(MatSetOption(A, MAT_NEW_NONZERO_ALLOCATION_ERR, PETSC_FALSE));
  PetscCall(MatGetType(A, &type));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "type: %s\n", type)); /* filtered out of the shared expected output */
  PetscCall(MatGetOwnershipRange(A, &rstart, &rend));
  PetscCall(MatCreateVecs(A, &x, &y));
  PetscCall(VecSet(x, 1.0));

  for (PetscInt k = 0; k < 4; k++) {
    const PetscBool full = (PetscBool)(k >= 2); /* assemblies 2 and 3: every row, and a wider pattern */
    for (PetscInt i = rstart; i < rend; i++) {
      if (!full && i % 2) continue; /* empty rows */
      PetscInt cols[4] = {i, (i + 1) % N, (i + N - 1) % N, (i + N / 2) % N}, nc = full ? 4 : 2;
      for (PetscInt c = 0; c < nc; c++) PetscCall(MatSetValue(A, i, cols[c], (PetscScalar)(10 * k + i + c + 1), INSERT_VALUES));
    }
    PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
    PetscCall(MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY));
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "assembly %" PetscInt_FMT " (%s)\n", k, k == 0 ? "first" : k == 2 ? "new pattern" : "same pattern, new values"));
    PetscCall(MatMult(A, x, y));
    PetscCall(PrintVec("Ax", y));
    PetscCall(MatMultTransposeAdd(A, x, y, y)); /* y[i] = sum of row i and column i of A */
    PetscCall(PrintVec("+A'x", y));
    PetscCall(MatGetDiagonal(A, y));
    PetscCall(PrintVec("diag", y));
  }
  PetscCall(MatDestroy(&A));
  PetscCall(VecDestroy(&x));
  PetscCall(VecDestroy(&y));
  PetscCall(PetscFinalize());
  return 0;
}
