static char help[] = "Solves A x = b with KSP; the matrix type comes from -mat_type (default aijpredict).\n\
The matrix is read from a Matrix Market file (-f file.mtx[.gz]) or generated (-gen spec, default lap7:N x N x N\n\
with -n N, default 32). The right-hand side is b = A * ones, so the exact solution is known and the run is\n\
self-checking: it fails when the relative error of the solution exceeds -check_tol (default 1e-6).\n\
Options:\n\
  -f <file>          Matrix Market file (.mtx or .mtx.gz; real, integer or pattern; general or symmetric)\n\
  -gen <spec>        generator spec (see below), used when -f is not given\n\
  -n <N>             size of the default 3D 7-point Laplacian (N^3 rows), default 32\n\
  -check_tol <tol>   maximum relative error ||x - 1|| / ||1|| (default 1e-6; negative disables the check)\n\
  -repeat <k>        solve k times (the matrix is converted once; default 1)\n";

#include <petscksp.h>
#include <petscaijpredict.h>

#include <string>

#include "load_matrix.hpp"

int main(int argc, char **argv)
{
  Mat         A;
  Vec         x, b, u;
  KSP         ksp;
  char        file[PETSC_MAX_PATH_LEN] = "", spec[256] = "";
  PetscInt    n = 32, repeat = 1, its;
  PetscReal   check_tol = 1e-6, err, unorm, rnorm;
  PetscMPIInt rank, size;
  PetscBool   flg;
  const char *fmt = nullptr;
  MatType     type;
  VecType     vtype;

  PetscFunctionBeginUser;
  PetscCall(PetscInitialize(&argc, &argv, nullptr, help));
  PetscCall(MatAIJPredictInitializePackage());
  PetscCallMPI(MPI_Comm_rank(PETSC_COMM_WORLD, &rank));
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &size));
  PetscCall(PetscOptionsGetString(nullptr, nullptr, "-f", file, sizeof(file), nullptr));
  PetscCall(PetscOptionsGetInt(nullptr, nullptr, "-n", &n, nullptr));
  PetscCall(PetscOptionsGetInt(nullptr, nullptr, "-repeat", &repeat, nullptr));
  PetscCall(PetscOptionsGetReal(nullptr, nullptr, "-check_tol", &check_tol, nullptr));
  PetscCall(PetscOptionsGetString(nullptr, nullptr, "-gen", spec, sizeof(spec), &flg));
  PetscCheck(n > 0, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-n must be positive, got %" PetscInt_FMT, n);
  if (!flg) PetscCall(PetscSNPrintf(spec, sizeof(spec), "lap7:%" PetscInt_FMT "x%" PetscInt_FMT "x%" PetscInt_FMT, n, n, n));

  /* Every rank reads or generates the whole matrix and inserts its own rows (examples only). */
  aijp::csr_matrix<double> h;
  PetscCall(LoadMatrix(file, spec, &h));
  PetscCheck(h.rows == h.cols, PETSC_COMM_WORLD, PETSC_ERR_ARG_SIZ, "KSP needs a square matrix; %s is %lld x %lld", file[0] ? file : spec, (long long)h.rows, (long long)h.cols);
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "Matrix %s: %lld rows, %lld nonzeros\n", file[0] ? file : spec, (long long)h.rows, (long long)h.nnz()));

  PetscInt M = (PetscInt)h.rows, mloc = PETSC_DECIDE, rstart, rend;
  PetscCall(PetscSplitOwnership(PETSC_COMM_WORLD, &mloc, &M));
  PetscCallMPI(MPI_Scan(&mloc, &rend, 1, MPIU_INT, MPI_SUM, PETSC_COMM_WORLD));
  rstart = rend - mloc;
  PetscCall(MatCreate(PETSC_COMM_WORLD, &A));
  PetscCall(MatSetSizes(A, mloc, mloc, M, M));
  PetscCall(MatSetType(A, MATAIJPREDICT));
  PetscCall(MatSetFromOptions(A));
  {
    PetscInt *d_nnz, *o_nnz, cstart = rstart, cend = rend;
    PetscCall(PetscCalloc2(rend - rstart, &d_nnz, rend - rstart, &o_nnz));
    for (PetscInt r = rstart; r < rend; ++r) {
      for (PetscInt k = h.row_ptr[r]; k < h.row_ptr[r + 1]; ++k) {
        if (h.col_idx[k] >= cstart && h.col_idx[k] < cend) d_nnz[r - rstart]++;
        else o_nnz[r - rstart]++;
      }
    }
    PetscCall(MatXAIJSetPreallocation(A, 1, d_nnz, o_nnz, nullptr, nullptr));
    /* MatXAIJSetPreallocation does not reach the SELL types (sell, sellcuda: -mat_type in the end-to-end
       benchmark); without this their MatSetValues reallocates on every row (minutes for 10M nonzeros). Both
       calls do nothing for other types. */
    PetscCall(MatSeqSELLSetPreallocation(A, 0, d_nnz));
    PetscCall(MatMPISELLSetPreallocation(A, 0, d_nnz, 0, o_nnz));
    PetscCall(PetscFree2(d_nnz, o_nnz));
  }
  for (PetscInt r = rstart; r < rend; ++r) {
    const PetscInt ncols = h.row_ptr[r + 1] - h.row_ptr[r];
    PetscInt      *cols;
    PetscScalar   *vals;
    PetscCall(PetscMalloc2(ncols, &cols, ncols, &vals));
    for (PetscInt k = 0; k < ncols; ++k) {
      cols[k] = h.col_idx[h.row_ptr[r] + k];
      vals[k] = (PetscScalar)h.values[h.row_ptr[r] + k];
    }
    PetscCall(MatSetValues(A, 1, &r, ncols, cols, vals, INSERT_VALUES));
    PetscCall(PetscFree2(cols, vals));
  }
  PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY));
  h = aijp::csr_matrix<double>(); /* PETSc holds the matrix now */

  PetscCall(MatCreateVecs(A, &x, &b));
  PetscCall(VecDuplicate(x, &u));
  PetscCall(VecSet(u, 1.0));
  PetscCall(MatMult(A, u, b));

  PetscCall(KSPCreate(PETSC_COMM_WORLD, &ksp));
  PetscCall(KSPSetOperators(ksp, A, A));
  PetscCall(KSPSetTolerances(ksp, 1e-10, PETSC_CURRENT, PETSC_CURRENT, PETSC_CURRENT));
  PetscCall(KSPSetFromOptions(ksp));
  for (PetscInt k = 0; k < repeat; ++k) {
    PetscCall(VecSet(x, 0.0));
    PetscCall(KSPSolve(ksp, b, x));
  }
  PetscCall(KSPGetIterationNumber(ksp, &its));
  PetscCall(KSPGetResidualNorm(ksp, &rnorm));
  PetscCall(VecNorm(u, NORM_2, &unorm));
  PetscCall(VecAXPY(x, -1.0, u));
  PetscCall(VecNorm(x, NORM_2, &err));
  err /= unorm;

  PetscCall(MatGetType(A, &type));
  if (size == 1) {
    PetscCall(PetscObjectTypeCompare((PetscObject)A, MATSEQAIJPREDICT, &flg));
    if (flg) PetscCall(MatAIJPredictGetFormat(A, &fmt));
  }
  PetscCall(VecGetType(u, &vtype));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "Matrix type %s, SpMV format %s, vector type %s\n", type, fmt ? fmt : "(n/a)", vtype));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "KSP iterations %" PetscInt_FMT ", residual norm %g, relative error %g\n", its, (double)rnorm, (double)err));
  PetscCheck(check_tol < 0 || err <= check_tol, PETSC_COMM_WORLD, PETSC_ERR_NOT_CONVERGED, "relative error %g exceeds -check_tol %g", (double)err, (double)check_tol);

  PetscCall(KSPDestroy(&ksp));
  PetscCall(VecDestroy(&x));
  PetscCall(VecDestroy(&b));
  PetscCall(VecDestroy(&u));
  PetscCall(MatDestroy(&A));
  PetscCall(PetscFinalize());
  return 0;
}
