static char help[] = "Every operation that changes a matrix, one at a time, each followed by its products.\n\
Run with -mat_type aij and with -mat_type aijpredict (plugin loaded with -dll_append); both outputs must equal\n\
output/matops.out, on 1, 2 or 3 processes. The products before an operation (printed by the step before) make\n\
the device copy exist; the products after it show whether it was refreshed. All values are small dyadic\n\
rationals, so every product is exact and the output does not depend on the summation order or the device.\n\
  -n <N>       global rows (default 12)\n\
  -file <f>    scratch file for the MatView/MatLoad round trip (default matops.bin)\n";

#include <petscmat.h>

/* Prints the whole vector on rank 0 with %g: exact for the small dyadic values of this test. */
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
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  %-6s", what));
  if (rank == 0)
    for (PetscInt i = 0; i < n; i++) PetscCall(PetscPrintf(PETSC_COMM_SELF, " %g", (double)PetscRealPart(a[i])));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "\n"));
  PetscCall(VecRestoreArrayRead(z, &a));
  PetscCall(VecScatterDestroy(&s));
  PetscCall(VecDestroy(&z));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* A x, A x + w, A^T x, A^T x + w and the diagonal, with vectors of the matrix's own type (MatCreateVecs). */
static PetscErrorCode Products(Mat A, const char *step)
{
  Vec         x, y, w;
  PetscInt    rstart, rend;
  PetscScalar one = 1.0;

  PetscFunctionBeginUser;
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%s\n", step));
  PetscCall(MatCreateVecs(A, &x, &y));
  PetscCall(VecDuplicate(y, &w));
  PetscCall(VecGetOwnershipRange(x, &rstart, &rend));
  for (PetscInt i = rstart; i < rend; i++) PetscCall(VecSetValue(x, i, (PetscScalar)(1 + i % 3), INSERT_VALUES));
  PetscCall(VecAssemblyBegin(x));
  PetscCall(VecAssemblyEnd(x));
  PetscCall(VecSet(w, one));
  PetscCall(VecSet(y, 1e30)); /* MatMult must not read y */
  PetscCall(MatMult(A, x, y));
  PetscCall(PrintVec("Ax", y));
  PetscCall(MatMultAdd(A, x, w, y));
  PetscCall(PrintVec("Ax+w", y));
  PetscCall(VecCopy(w, y));
  PetscCall(MatMultAdd(A, x, y, y));
  PetscCall(PrintVec("Ax+y", y));
  PetscCall(MatMultTranspose(A, x, y));
  PetscCall(PrintVec("A'x", y));
  PetscCall(MatMultTransposeAdd(A, x, w, y));
  PetscCall(PrintVec("A'x+w", y));
  PetscCall(MatGetDiagonal(A, y));
  PetscCall(PrintVec("diag", y));
  PetscCall(VecDestroy(&x));
  PetscCall(VecDestroy(&y));
  PetscCall(VecDestroy(&w));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Row i: columns i-1, i, i+1, i+N/2 (mod N), plus i+extra when extra > 0; value 1 + (i + 2j + seed) mod 7 halved. */
static PetscErrorCode Fill(Mat A, PetscInt N, PetscInt seed, PetscInt extra, InsertMode mode)
{
  PetscInt rstart, rend;

  PetscFunctionBeginUser;
  PetscCall(MatGetOwnershipRange(A, &rstart, &rend));
  for (PetscInt i = rstart; i < rend; i++) {
    PetscInt cols[5] = {(i + N - 1) % N, i, (i + 1) % N, (i + N / 2) % N, (i + extra) % N}, nc = extra > 0 ? 5 : 4;
    for (PetscInt k = 0; k < nc; k++) {
      PetscScalar v = 0.5 * (1 + (i + 2 * cols[k] + seed) % 7);
      PetscCall(MatSetValue(A, i, cols[k], v, mode));
    }
  }
  PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode NewMatrix(PetscInt N, const char *type, Mat *A)
{
  PetscFunctionBeginUser;
  PetscCall(MatCreate(PETSC_COMM_WORLD, A));
  PetscCall(MatSetSizes(*A, PETSC_DECIDE, PETSC_DECIDE, N, N));
  if (type) PetscCall(MatSetType(*A, type));
  else PetscCall(MatSetFromOptions(*A));
  PetscCall(MatSeqAIJSetPreallocation(*A, 6, NULL));
  PetscCall(MatMPIAIJSetPreallocation(*A, 6, NULL, 4, NULL));
  PetscCall(MatSetOption(*A, MAT_NEW_NONZERO_ALLOCATION_ERR, PETSC_FALSE));
  PetscFunctionReturn(PETSC_SUCCESS);
}

int main(int argc, char **argv)
{
  Mat         A, X, S, D, C, L;
  Vec         l, r;
  PetscInt    N = 12, rstart, rend;
  char        file[PETSC_MAX_PATH_LEN] = "matops.bin", *type;
  PetscBool   same;
  PetscViewer viewer;

  PetscFunctionBeginUser;
  PetscCall(PetscInitialize(&argc, &argv, NULL, help));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-n", &N, NULL));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-file", file, sizeof(file), NULL));
  PetscCheck(N >= 8, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-n must be at least 8");

  PetscCall(NewMatrix(N, NULL, &A));
  {
    MatType t;
    PetscCall(MatGetType(A, &t));
    PetscCall(PetscStrallocpy(t, &type));
  }
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "type: %s\n", type)); /* filtered out of the shared expected output */
  PetscCall(Fill(A, N, 0, 0, INSERT_VALUES));
  PetscCall(Products(A, "assembled"));
  PetscCall(MatDuplicate(A, MAT_COPY_VALUES, &X)); /* same pattern, for MatAXPY and MatCopy */
  PetscCall(MatScale(X, 0.5));

  PetscCall(MatScale(A, -2.5));
  PetscCall(Products(A, "MatScale"));
  PetscCall(MatShift(A, 3.0));
  PetscCall(Products(A, "MatShift"));

  PetscCall(MatCreateVecs(A, &r, &l));
  PetscCall(VecGetOwnershipRange(l, &rstart, &rend));
  for (PetscInt i = rstart; i < rend; i++) PetscCall(VecSetValue(l, i, (PetscScalar)(i % 2 ? 2.0 : 0.5), INSERT_VALUES));
  PetscCall(VecAssemblyBegin(l));
  PetscCall(VecAssemblyEnd(l));
  PetscCall(VecSet(r, 2.0));
  PetscCall(MatDiagonalSet(A, l, INSERT_VALUES));
  PetscCall(Products(A, "MatDiagonalSet INSERT"));
  PetscCall(MatDiagonalSet(A, l, ADD_VALUES));
  PetscCall(Products(A, "MatDiagonalSet ADD"));
  PetscCall(MatDiagonalScale(A, l, r));
  PetscCall(Products(A, "MatDiagonalScale"));

  PetscCall(MatAXPY(A, 2.0, X, SAME_NONZERO_PATTERN));
  PetscCall(Products(A, "MatAXPY SAME_NONZERO_PATTERN"));
  PetscCall(NewMatrix(N, MATAIJ, &S)); /* the diagonal only: a subset of A's pattern */
  PetscCall(MatAssemblyBegin(S, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(S, MAT_FINAL_ASSEMBLY));
  PetscCall(MatShift(S, 1.0));
  PetscCall(MatAXPY(A, 0.5, S, SUBSET_NONZERO_PATTERN));
  PetscCall(Products(A, "MatAXPY SUBSET_NONZERO_PATTERN"));
  PetscCall(MatDestroy(&S));
  PetscCall(NewMatrix(N, MATAIJ, &S)); /* entries A does not have */
  PetscCall(Fill(S, N, 3, 2, INSERT_VALUES));
  PetscCall(MatAXPY(A, 1.0, S, DIFFERENT_NONZERO_PATTERN));
  PetscCall(Products(A, "MatAXPY DIFFERENT_NONZERO_PATTERN"));

  PetscCall(Fill(A, N, 5, 2, INSERT_VALUES));
  PetscCall(Products(A, "MatSetValues INSERT, same pattern"));
  PetscCall(Fill(A, N, 1, 0, ADD_VALUES));
  PetscCall(Products(A, "MatSetValues ADD, same pattern"));
  PetscCall(MatSetOption(A, MAT_NEW_NONZERO_LOCATIONS, PETSC_FALSE));
  PetscCall(Fill(A, N, 2, 3, INSERT_VALUES)); /* the new column i+3 is dropped */
  PetscCall(Products(A, "MAT_NEW_NONZERO_LOCATIONS false, new locations dropped"));
  PetscCall(MatSetOption(A, MAT_NEW_NONZERO_LOCATIONS, PETSC_TRUE));
  PetscCall(Fill(A, N, 4, 3, INSERT_VALUES));
  PetscCall(Products(A, "MatSetValues, new pattern"));

  {
    PetscInt rows[] = {1, 7};
    PetscCall(MatZeroRows(A, 2, rows, 2.0, NULL, NULL));
    PetscCall(Products(A, "MatZeroRows"));
  }
  {
    PetscInt rows[] = {2};
    PetscCall(MatSetOption(A, MAT_KEEP_NONZERO_PATTERN, PETSC_TRUE));
    PetscCall(MatZeroRows(A, 1, rows, 0.0, NULL, NULL));
    PetscCall(Products(A, "MatZeroRows MAT_KEEP_NONZERO_PATTERN"));
    PetscCall(MatSetOption(A, MAT_KEEP_NONZERO_PATTERN, PETSC_FALSE));
  }
  {
    PetscInt rows[] = {3, 8};
    PetscCall(MatZeroRowsColumns(A, 2, rows, 1.0, NULL, NULL));
    PetscCall(Products(A, "MatZeroRowsColumns"));
  }

  PetscCall(MatSetOption(A, MAT_NEW_NONZERO_LOCATIONS, PETSC_FALSE));
  PetscCall(MatStoreValues(A));
  PetscCall(MatScale(A, 3.0));
  PetscCall(Products(A, "MatStoreValues, MatScale"));
  PetscCall(MatRetrieveValues(A));
  PetscCall(Products(A, "MatRetrieveValues"));
  PetscCall(MatSetOption(A, MAT_NEW_NONZERO_LOCATIONS, PETSC_TRUE));

  PetscCall(MatDuplicate(A, MAT_COPY_VALUES, &D));
  PetscCall(MatScale(D, 2.0));
  PetscCall(MatCopy(D, A, SAME_NONZERO_PATTERN));
  PetscCall(Products(A, "MatCopy SAME_NONZERO_PATTERN"));
  PetscCall(MatCopy(S, A, DIFFERENT_NONZERO_PATTERN));
  PetscCall(Products(A, "MatCopy DIFFERENT_NONZERO_PATTERN"));
  PetscCall(MatDestroy(&S));

  PetscCall(MatZeroEntries(A));
  PetscCall(Products(A, "MatZeroEntries"));
  PetscCall(Fill(A, N, 6, 1, INSERT_VALUES));
  PetscCall(Products(A, "refilled"));

  /* A duplicate is the same type and has its own device copy. */
  PetscCall(MatDestroy(&D));
  PetscCall(MatDuplicate(A, MAT_COPY_VALUES, &D));
  PetscCall(PetscObjectTypeCompare((PetscObject)D, type, &same));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "MatDuplicate keeps the type: %s\n", same ? "yes" : "no"));
  PetscCall(Products(D, "MatDuplicate"));
  PetscCall(MatScale(D, 4.0));
  PetscCall(Products(D, "duplicate after MatScale"));
  PetscCall(Products(A, "original unchanged"));
  PetscCall(MatDestroy(&D));
  PetscCall(MatDuplicate(A, MAT_DO_NOT_COPY_VALUES, &D));
  PetscCall(Products(D, "MatDuplicate MAT_DO_NOT_COPY_VALUES"));
  PetscCall(MatDestroy(&D));

  /* MatConvert both ways: a new matrix, back into it, and in place. */
  PetscCall(MatConvert(A, MATAIJ, MAT_INITIAL_MATRIX, &C));
  PetscCall(Products(C, "MatConvert to aij, MAT_INITIAL_MATRIX"));
  PetscCall(MatConvert(C, type, MAT_INITIAL_MATRIX, &D));
  PetscCall(PetscObjectTypeCompare((PetscObject)D, type, &same));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "MatConvert back, MAT_INITIAL_MATRIX: type restored: %s\n", same ? "yes" : "no"));
  PetscCall(Products(D, "MatConvert back, MAT_INITIAL_MATRIX"));
  PetscCall(MatScale(C, 0.5));
  PetscCall(MatConvert(C, type, MAT_REUSE_MATRIX, &D));
  PetscCall(Products(D, "MatConvert back, MAT_REUSE_MATRIX"));
  PetscCall(MatScale(A, 2.0));
  PetscCall(MatConvert(A, MATAIJ, MAT_REUSE_MATRIX, &C));
  PetscCall(Products(C, "MatConvert to aij, MAT_REUSE_MATRIX"));
  PetscCall(MatConvert(C, type, MAT_INPLACE_MATRIX, &C));
  PetscCall(PetscObjectTypeCompare((PetscObject)C, type, &same));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "MatConvert back, MAT_INPLACE_MATRIX: type restored: %s\n", same ? "yes" : "no"));
  PetscCall(Products(C, "MatConvert back, MAT_INPLACE_MATRIX"));
  PetscCall(MatDestroy(&C));
  PetscCall(MatDestroy(&D));
  PetscCall(MatConvert(A, MATAIJ, MAT_INPLACE_MATRIX, &A));
  PetscCall(MatScale(A, 0.5));
  PetscCall(MatConvert(A, type, MAT_INPLACE_MATRIX, &A));
  PetscCall(PetscObjectTypeCompare((PetscObject)A, type, &same));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "MatConvert to aij and back in place: type restored: %s\n", same ? "yes" : "no"));
  PetscCall(Products(A, "MatConvert to aij and back, MAT_INPLACE_MATRIX"));

  /* Bound to the CPU: SeqAIJ products; unbound: the device copy again, refreshed. */
  PetscCall(MatBindToCPU(A, PETSC_TRUE));
  PetscCall(Products(A, "MatBindToCPU true"));
  PetscCall(MatScale(A, -1.0));
  PetscCall(Products(A, "MatScale while bound"));
  PetscCall(MatBindToCPU(A, PETSC_FALSE));
  PetscCall(Products(A, "MatBindToCPU false"));

  /* MatView (binary) and MatLoad: the loaded matrix has the type of -mat_type. */
  PetscCall(PetscViewerBinaryOpen(PETSC_COMM_WORLD, file, FILE_MODE_WRITE, &viewer));
  PetscCall(MatView(A, viewer));
  PetscCall(PetscViewerDestroy(&viewer));
  PetscCall(MatCreate(PETSC_COMM_WORLD, &L));
  PetscCall(MatSetFromOptions(L));
  PetscCall(PetscViewerBinaryOpen(PETSC_COMM_WORLD, file, FILE_MODE_READ, &viewer));
  PetscCall(MatLoad(L, viewer));
  PetscCall(PetscViewerDestroy(&viewer));
  PetscCall(PetscObjectTypeCompare((PetscObject)L, type, &same));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "MatLoad gives the type of -mat_type: %s\n", same ? "yes" : "no"));
  PetscCall(Products(L, "MatLoad"));
  PetscCall(MatDestroy(&L));

  /* COO assembly replaces the pattern; MatSetValuesCOO then changes values only. */
  {
    PetscInt     nloc, *ci, *cj, k = 0;
    PetscScalar *cv;
    PetscCall(MatGetOwnershipRange(A, &rstart, &rend));
    nloc = 3 * (rend - rstart);
    PetscCall(PetscMalloc3(nloc, &ci, nloc, &cj, nloc, &cv));
    for (PetscInt i = rstart; i < rend; i++) {
      PetscInt cols[3] = {i, (i + 2) % N, (i + 5) % N};
      for (PetscInt c = 0; c < 3; c++, k++) {
        ci[k] = i;
        cj[k] = cols[c];
        cv[k] = 0.5 * (1 + (i + c) % 5);
      }
    }
    PetscCall(MatSetPreallocationCOO(A, nloc, ci, cj));
    PetscCall(MatSetValuesCOO(A, cv, INSERT_VALUES));
    PetscCall(Products(A, "MatSetPreallocationCOO, MatSetValuesCOO INSERT"));
    PetscCall(MatSetValuesCOO(A, cv, ADD_VALUES));
    PetscCall(Products(A, "MatSetValuesCOO ADD"));
    PetscCall(PetscFree3(ci, cj, cv));
  }

  PetscCall(MatTranspose(A, MAT_INPLACE_MATRIX, &A));
  PetscCall(Products(A, "MatTranspose MAT_INPLACE_MATRIX"));

  PetscCall(PetscFree(type));
  PetscCall(VecDestroy(&l));
  PetscCall(VecDestroy(&r));
  PetscCall(MatDestroy(&X));
  PetscCall(MatDestroy(&A));
  PetscCall(PetscFinalize());
  return 0;
}
