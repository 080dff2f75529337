// MATSEQAIJPREDICT against MATSEQAIJ: MatMult, MatMultAdd, MatMultTranspose(Add) on every shared real matrix
// and the edge cases, with host vectors and (when a GPU is present) the VECCUDA vectors of MatCreateVecs,
// before and after every operation that changes values or pattern, one at a time.
// Without a GPU, main() sets -mat_aijpredict_host_copy: the aijpredict matrix then multiplies with a host copy
// refreshed exactly when the device copy would be (and errors out if the states say "current" but the arrays
// differ), so a stale device copy shows up on a machine without a GPU too.
#include <petscaijpredict.h>
#include <petscvec.h>

#include <aijpredict/device.hpp>

#include "test_matrices.hpp"

#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

bool have_gpu() { return aijp::device_available(); }

#define ASSERT_PETSC(call) ASSERT_EQ((call), PETSC_SUCCESS) << #call

Mat make_matrix(const aijp::csr_matrix<double>& a, MatType type)
{
  Mat m;
  std::vector<PetscInt> ri(a.row_ptr.begin(), a.row_ptr.end()), ci(a.col_idx.begin(), a.col_idx.end());
  EXPECT_EQ(MatCreate(PETSC_COMM_SELF, &m), PETSC_SUCCESS);
  EXPECT_EQ(MatSetSizes(m, a.rows, a.cols, a.rows, a.cols), PETSC_SUCCESS);
  EXPECT_EQ(MatSetType(m, type), PETSC_SUCCESS);
  EXPECT_EQ(MatSeqAIJSetPreallocationCSR(m, ri.data(), ci.data(), a.values.data()), PETSC_SUCCESS);
  return m;
}

Vec make_vec(VecType type, PetscInt n, unsigned long long seed)
{
  Vec v;
  EXPECT_EQ(VecCreate(PETSC_COMM_SELF, &v), PETSC_SUCCESS);
  EXPECT_EQ(VecSetSizes(v, n, n), PETSC_SUCCESS);
  EXPECT_EQ(VecSetType(v, type), PETSC_SUCCESS);
  const auto h = aijp::test::random_vector(n, seed);
  PetscScalar* p;
  EXPECT_EQ(VecGetArrayWrite(v, &p), PETSC_SUCCESS);
  std::copy(h.begin(), h.end(), p);
  EXPECT_EQ(VecRestoreArrayWrite(v, &p), PETSC_SUCCESS);
  return v;
}

// max_i |u_i - v_i| / max(max_i |ref_i|, tiny): the relative difference of two results.
double rel_diff(Vec u, Vec v)
{
  const PetscScalar *a, *b;
  PetscInt n;
  EXPECT_EQ(VecGetLocalSize(u, &n), PETSC_SUCCESS);
  EXPECT_EQ(VecGetArrayRead(u, &a), PETSC_SUCCESS);
  EXPECT_EQ(VecGetArrayRead(v, &b), PETSC_SUCCESS);
  double num = 0, den = 0;
  for (PetscInt i = 0; i < n; ++i) {
    if (std::isnan(PetscRealPart(b[i]))) num = INFINITY;
    num = std::max(num, (double)PetscAbsScalar(a[i] - b[i]));
    den = std::max(den, (double)PetscAbsScalar(a[i]));
  }
  EXPECT_EQ(VecRestoreArrayRead(u, &a), PETSC_SUCCESS);
  EXPECT_EQ(VecRestoreArrayRead(v, &b), PETSC_SUCCESS);
  return den > 0 ? num / den : num;
}

// Compares every product of A (seqaij) and B (seqaijpredict) with vectors of type vt.
void compare_products(Mat A, Mat B, VecType vt, const std::string& what)
{
  PetscInt m, n;
  ASSERT_PETSC(MatGetSize(A, &m, &n));
  Vec x = make_vec(vt, n, 1), xt = make_vec(vt, m, 2), z = make_vec(vt, m, 3), zt = make_vec(vt, n, 4);
  Vec y1 = make_vec(vt, m, 5), y2 = make_vec(vt, m, 6), t1 = make_vec(vt, n, 7), t2 = make_vec(vt, n, 8);
  const double tol = 1e-12;

  ASSERT_PETSC(MatMult(A, x, y1));
  ASSERT_PETSC(VecSet(y2, NAN));  // MatMult must not read y
  ASSERT_PETSC(MatMult(B, x, y2));
  EXPECT_LE(rel_diff(y1, y2), tol) << what << " MatMult";

  ASSERT_PETSC(MatMultAdd(A, x, z, y1));
  ASSERT_PETSC(MatMultAdd(B, x, z, y2));
  EXPECT_LE(rel_diff(y1, y2), tol) << what << " MatMultAdd";
  ASSERT_PETSC(VecCopy(z, y1));
  ASSERT_PETSC(VecCopy(z, y2));
  ASSERT_PETSC(MatMultAdd(A, x, y1, y1));
  ASSERT_PETSC(MatMultAdd(B, x, y2, y2));
  EXPECT_LE(rel_diff(y1, y2), tol) << what << " MatMultAdd in place";

  ASSERT_PETSC(MatMultTranspose(A, xt, t1));
  ASSERT_PETSC(MatMultTranspose(B, xt, t2));
  EXPECT_LE(rel_diff(t1, t2), tol) << what << " MatMultTranspose";
  ASSERT_PETSC(MatMultTransposeAdd(A, xt, zt, t1));
  ASSERT_PETSC(MatMultTransposeAdd(B, xt, zt, t2));
  EXPECT_LE(rel_diff(t1, t2), tol) << what << " MatMultTransposeAdd";

  ASSERT_PETSC(MatGetDiagonal(A, y1));
  ASSERT_PETSC(VecSet(y2, NAN));
  ASSERT_PETSC(MatGetDiagonal(B, y2));
  EXPECT_EQ(rel_diff(y1, y2), 0.0) << what << " MatGetDiagonal";

  for (Vec* v : {&x, &xt, &z, &zt, &y1, &y2, &t1, &t2}) VecDestroy(v);
}

void compare_all(const aijp::csr_matrix<double>& a, const std::string& name)
{
  Mat A = make_matrix(a, MATSEQAIJ), B = make_matrix(a, MATSEQAIJPREDICT);
  PetscBool same;
  ASSERT_PETSC(PetscObjectTypeCompare((PetscObject)B, MATSEQAIJPREDICT, &same));
  ASSERT_TRUE(same);
  std::vector<VecType> types{VECSEQ};
  if (have_gpu()) types.push_back(VECSEQCUDA);
  for (VecType vt : types) compare_products(A, B, vt, name + " [" + vt + "]");

  // Value changes must reach the device copy.
  ASSERT_PETSC(MatScale(A, -2.5));
  ASSERT_PETSC(MatScale(B, -2.5));
  if (a.rows == a.cols && a.rows > 0) {
    ASSERT_PETSC(MatShift(A, 3.0));
    ASSERT_PETSC(MatShift(B, 3.0));
  }
  for (VecType vt : types) compare_products(A, B, vt, name + " scaled [" + vt + "]");
  ASSERT_PETSC(MatDestroy(&A));
  ASSERT_PETSC(MatDestroy(&B));
}

TEST(PetscAIJPredict, MatchesSeqAIJOnSharedRealMatrices)
{
  for (const auto& n : aijp::test::real_matrix_names()) compare_all(aijp::test::load_shared(n), n);
}

TEST(PetscAIJPredict, MatchesSeqAIJOnEdgeCases)
{
  for (const auto& e : aijp::test::edge_cases()) compare_all(e.a, e.name);
}

TEST(PetscAIJPredict, ReassemblySamePatternThenNewPattern)
{
  // 1D Laplacian assembled with MatSetValues; then new values (same pattern); then a new nonzero.
  const PetscInt n = 1000;
  Mat A, B;
  for (Mat* m : {&A, &B}) {
    ASSERT_PETSC(MatCreate(PETSC_COMM_SELF, m));
    ASSERT_PETSC(MatSetSizes(*m, n, n, n, n));
    ASSERT_PETSC(MatSetType(*m, m == &A ? MATSEQAIJ : MATSEQAIJPREDICT));
    ASSERT_PETSC(MatSeqAIJSetPreallocation(*m, 4, nullptr));
    ASSERT_PETSC(MatSetOption(*m, MAT_NEW_NONZERO_ALLOCATION_ERR, PETSC_FALSE));
  }
  const auto assemble = [&](PetscScalar diag, bool extra) {
    for (Mat m : {A, B}) {
      for (PetscInt i = 0; i < n; ++i) {
        if (i > 0) MatSetValue(m, i, i - 1, -1.0, INSERT_VALUES);
        MatSetValue(m, i, i, diag, INSERT_VALUES);
        if (i < n - 1) MatSetValue(m, i, i + 1, -1.0, INSERT_VALUES);
      }
      if (extra) MatSetValue(m, 0, n - 1, 0.5, INSERT_VALUES);
      MatAssemblyBegin(m, MAT_FINAL_ASSEMBLY);
      MatAssemblyEnd(m, MAT_FINAL_ASSEMBLY);
    }
  };
  std::vector<VecType> types{VECSEQ};
  if (have_gpu()) types.push_back(VECSEQCUDA);
  assemble(2.0, false);
  for (VecType vt : types) compare_products(A, B, vt, "first assembly");
  assemble(4.0, false);
  for (VecType vt : types) compare_products(A, B, vt, "same pattern, new values");
  assemble(5.0, true);
  for (VecType vt : types) compare_products(A, B, vt, "new pattern");
  ASSERT_PETSC(MatZeroEntries(B));
  ASSERT_PETSC(MatZeroEntries(A));
  for (VecType vt : types) compare_products(A, B, vt, "zeroed");
  ASSERT_PETSC(MatDestroy(&A));
  ASSERT_PETSC(MatDestroy(&B));
}

TEST(PetscAIJPredict, FormatQueryAndDuplicateAndConvertBack)
{
  const auto a = aijp::test::load_shared("bcsstk13");
  Mat B = make_matrix(a, MATSEQAIJPREDICT), D, C;
  Vec x = make_vec(VECSEQ, a.cols, 1), y = make_vec(VECSEQ, a.rows, 2);
  ASSERT_PETSC(MatMult(B, x, y));
  const char* fmt = nullptr;
  ASSERT_PETSC(MatAIJPredictGetFormat(B, &fmt));
  ASSERT_NE(fmt, nullptr);
  if (have_gpu()) EXPECT_STRNE(fmt, "cpu");
  else EXPECT_STREQ(fmt, "host_copy");
  ASSERT_PETSC(MatDuplicate(B, MAT_COPY_VALUES, &D));
  PetscBool same;
  ASSERT_PETSC(PetscObjectTypeCompare((PetscObject)D, MATSEQAIJPREDICT, &same));
  EXPECT_TRUE(same);
  ASSERT_PETSC(MatConvert(B, MATSEQAIJ, MAT_INITIAL_MATRIX, &C));
  ASSERT_PETSC(PetscObjectTypeCompare((PetscObject)C, MATSEQAIJ, &same));
  EXPECT_TRUE(same);
  compare_products(C, D, VECSEQ, "duplicate vs converted");
  ASSERT_PETSC(MatConvert(B, MATSEQAIJ, MAT_INPLACE_MATRIX, &B));
  ASSERT_PETSC(PetscObjectTypeCompare((PetscObject)B, MATSEQAIJ, &same));
  EXPECT_TRUE(same);
  compare_products(B, D, VECSEQ, "converted in place");
  for (Mat* m : {&B, &C, &D}) MatDestroy(m);
  VecDestroy(&x);
  VecDestroy(&y);
}


// The format in use after a product: a GPU format, or "host_copy" without a GPU (never "cpu": then the test
// would compare SeqAIJ with itself and prove nothing about the device copy).
std::string format_after_product(Mat B)
{
  PetscInt m, n;
  EXPECT_EQ(MatGetLocalSize(B, &m, &n), PETSC_SUCCESS);
  Vec x = make_vec(VECSEQ, n, 11), y = make_vec(VECSEQ, m, 12);
  EXPECT_EQ(MatMult(B, x, y), PETSC_SUCCESS);
  const char* fmt = nullptr;
  EXPECT_EQ(MatAIJPredictGetFormat(B, &fmt), PETSC_SUCCESS);
  VecDestroy(&x);
  VecDestroy(&y);
  return fmt ? fmt : "";
}

// A 2D 5-point Laplacian on an nx x nx grid with every 7th row empty, assembled with MatSetValues.
Mat laplacian_with_empty_rows(MatType type, PetscInt nx)
{
  const PetscInt n = nx * nx;
  Mat            m;
  EXPECT_EQ(MatCreate(PETSC_COMM_SELF, &m), PETSC_SUCCESS);
  EXPECT_EQ(MatSetSizes(m, n, n, n, n), PETSC_SUCCESS);
  EXPECT_EQ(MatSetType(m, type), PETSC_SUCCESS);
  EXPECT_EQ(MatSeqAIJSetPreallocation(m, 7, nullptr), PETSC_SUCCESS);
  EXPECT_EQ(MatSetOption(m, MAT_NEW_NONZERO_ALLOCATION_ERR, PETSC_FALSE), PETSC_SUCCESS);
  for (PetscInt i = 0; i < n; ++i) {
    if (i % 7 == 6) continue;
    const PetscInt r = i / nx, c = i % nx;
    std::vector<PetscInt>    cols{i};
    std::vector<PetscScalar> vals{4.0 + 0.01 * i};
    for (PetscInt j : {c > 0 ? i - 1 : -1, c < nx - 1 ? i + 1 : -1, r > 0 ? i - nx : -1, r < nx - 1 ? i + nx : -1}) {
      cols.push_back(j); // negative columns are ignored by MatSetValues
      vals.push_back(-1.0);
    }
    EXPECT_EQ(MatSetValues(m, 1, &i, (PetscInt)cols.size(), cols.data(), vals.data(), INSERT_VALUES), PETSC_SUCCESS);
  }
  EXPECT_EQ(MatAssemblyBegin(m, MAT_FINAL_ASSEMBLY), PETSC_SUCCESS);
  EXPECT_EQ(MatAssemblyEnd(m, MAT_FINAL_ASSEMBLY), PETSC_SUCCESS);
  return m;
}

struct operation {
  const char*                            name;
  std::function<PetscErrorCode(Mat, Mat)> apply; // (matrix, an aij helper matrix of the same size and pattern)
};

// Every operation that changes values or the pattern, one at a time: products before (so the copy exists), the
// operation on the aij and the aijpredict matrix, products after, compared.
TEST(PetscAIJPredict, EveryOperationLeavesNoStaleCopy)
{
  const PetscInt nx = 24, n = nx * nx;
  const std::vector<operation> ops = {
    {"MatScale", [](Mat A, Mat) { return MatScale(A, -2.5); }},
    {"MatShift", [](Mat A, Mat) { return MatShift(A, 3.0); }},
    {"MatDiagonalSet INSERT", [n](Mat A, Mat) {
       Vec d = make_vec(VECSEQ, n, 21);
       PetscCall(MatDiagonalSet(A, d, INSERT_VALUES));
       return VecDestroy(&d);
     }},
    {"MatDiagonalSet ADD", [n](Mat A, Mat) {
       Vec d = make_vec(VECSEQ, n, 22);
       PetscCall(MatDiagonalSet(A, d, ADD_VALUES));
       return VecDestroy(&d);
     }},
    {"MatDiagonalScale", [n](Mat A, Mat) {
       Vec l = make_vec(VECSEQ, n, 23), r = make_vec(VECSEQ, n, 24);
       PetscCall(MatDiagonalScale(A, l, r));
       PetscCall(VecDestroy(&l));
       return VecDestroy(&r);
     }},
    {"MatAXPY SAME_NONZERO_PATTERN", [](Mat A, Mat) {
       Mat X;
       PetscCall(MatDuplicate(A, MAT_COPY_VALUES, &X));
       PetscCall(MatScale(X, 0.5));
       PetscCall(MatAXPY(A, 0.75, X, SAME_NONZERO_PATTERN));
       return MatDestroy(&X);
     }},
    {"MatAXPY SUBSET_NONZERO_PATTERN", [n](Mat A, Mat) {
       Mat X;
       PetscCall(MatCreateSeqAIJ(PETSC_COMM_SELF, n, n, 1, nullptr, &X));
       for (PetscInt i = 0; i < n; i += 2) PetscCall(MatSetValue(X, i, i, 0.5, INSERT_VALUES)); /* diagonal: in A after MatShift */
       PetscCall(MatAssemblyBegin(X, MAT_FINAL_ASSEMBLY));
       PetscCall(MatAssemblyEnd(X, MAT_FINAL_ASSEMBLY));
       PetscCall(MatAXPY(A, 2.0, X, SUBSET_NONZERO_PATTERN));
       return MatDestroy(&X);
     }},
    {"MatAXPY DIFFERENT_NONZERO_PATTERN", [n](Mat A, Mat) {
       Mat X;
       PetscCall(MatCreateSeqAIJ(PETSC_COMM_SELF, n, n, 1, nullptr, &X));
       for (PetscInt i = 0; i < n; ++i) PetscCall(MatSetValue(X, i, (i + 5) % n, 1.0 + i % 3, INSERT_VALUES));
       PetscCall(MatAssemblyBegin(X, MAT_FINAL_ASSEMBLY));
       PetscCall(MatAssemblyEnd(X, MAT_FINAL_ASSEMBLY));
       PetscCall(MatAXPY(A, 2.0, X, DIFFERENT_NONZERO_PATTERN));
       return MatDestroy(&X);
     }},
    {"MatZeroRows", [](Mat A, Mat) {
       const PetscInt rows[] = {0, 3, 50, 51};
       return MatZeroRows(A, 4, rows, 2.0, nullptr, nullptr);
     }},
    {"MatZeroRows MAT_KEEP_NONZERO_PATTERN", [](Mat A, Mat) {
       const PetscInt rows[] = {1, 60};
       PetscCall(MatSetOption(A, MAT_KEEP_NONZERO_PATTERN, PETSC_TRUE));
       PetscCall(MatZeroRows(A, 2, rows, 0.0, nullptr, nullptr));
       return MatSetOption(A, MAT_KEEP_NONZERO_PATTERN, PETSC_FALSE);
     }},
    {"MatZeroRowsColumns", [](Mat A, Mat) {
       const PetscInt rows[] = {2, 30, 31};
       return MatZeroRowsColumns(A, 3, rows, 1.0, nullptr, nullptr);
     }},
    {"MatZeroEntries", [](Mat A, Mat X) {
       PetscCall(MatZeroEntries(A));
       return MatAXPY(A, 1.0, X, DIFFERENT_NONZERO_PATTERN); // refill, so the next operations see values
     }},
    {"MatStoreValues/MatRetrieveValues", [](Mat A, Mat) {
       Vec x, y;
       PetscCall(MatSetOption(A, MAT_NEW_NONZERO_LOCATIONS, PETSC_FALSE));
       PetscCall(MatStoreValues(A));
       PetscCall(MatScale(A, 7.0));
       PetscCall(MatCreateVecs(A, &x, &y));
       PetscCall(VecSet(x, 1.0));
       PetscCall(MatMult(A, x, y)); // the copy now holds the scaled values
       PetscCall(MatRetrieveValues(A));
       PetscCall(VecDestroy(&x));
       PetscCall(VecDestroy(&y));
       return MatSetOption(A, MAT_NEW_NONZERO_LOCATIONS, PETSC_TRUE);
     }},
    {"MatSetValues INSERT + assembly", [](Mat A, Mat) {
       for (PetscInt i = 0; i < 40; ++i) PetscCall(MatSetValue(A, i, i, 10.0 + i, INSERT_VALUES));
       PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
       return MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY);
     }},
    {"MatSetValues ADD + flush + assembly", [](Mat A, Mat) {
       for (PetscInt i = 0; i < 40; ++i) PetscCall(MatSetValue(A, i, i, 1.5, ADD_VALUES));
       PetscCall(MatAssemblyBegin(A, MAT_FLUSH_ASSEMBLY));
       PetscCall(MatAssemblyEnd(A, MAT_FLUSH_ASSEMBLY));
       for (PetscInt i = 0; i < 40; ++i) PetscCall(MatSetValue(A, i, i, 1.5, ADD_VALUES));
       PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
       return MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY);
     }},
    {"MatSetValues new nonzeros + assembly", [n](Mat A, Mat) {
       for (PetscInt i = 0; i < n; i += 9) PetscCall(MatSetValue(A, i, (i * 7 + 3) % n, 0.25, INSERT_VALUES));
       PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
       return MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY);
     }},
    {"MAT_NEW_NONZERO_LOCATIONS false, new locations dropped", [n](Mat A, Mat) {
       PetscCall(MatSetOption(A, MAT_NEW_NONZERO_LOCATIONS, PETSC_FALSE));
       for (PetscInt i = 0; i < n; i += 5) {
         PetscCall(MatSetValue(A, i, (i * 11 + 1) % n, 9.0, INSERT_VALUES));
         PetscCall(MatSetValue(A, i, i, -3.0, INSERT_VALUES));
       }
       PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
       PetscCall(MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY));
       return MatSetOption(A, MAT_NEW_NONZERO_LOCATIONS, PETSC_TRUE);
     }},
    {"MatSeqAIJGetArray/RestoreArray", [](Mat A, Mat) {
       PetscScalar* a;
       PetscInt     nz;
       MatInfo      info;
       PetscCall(MatGetInfo(A, MAT_LOCAL, &info));
       nz = (PetscInt)info.nz_used;
       PetscCall(MatSeqAIJGetArray(A, &a));
       for (PetscInt k = 0; k < nz; k += 3) a[k] *= -1.0;
       return MatSeqAIJRestoreArray(A, &a);
     }},
    {"MatSeqAIJGetArrayWrite/RestoreArrayWrite", [](Mat A, Mat) {
       PetscScalar* a;
       MatInfo      info;
       PetscCall(MatGetInfo(A, MAT_LOCAL, &info));
       PetscCall(MatSeqAIJGetArrayWrite(A, &a));
       for (PetscInt k = 0; k < (PetscInt)info.nz_used; ++k) a[k] = 1.0 + k % 5;
       return MatSeqAIJRestoreArrayWrite(A, &a);
     }},
    {"MatCopy SAME_NONZERO_PATTERN", [](Mat A, Mat) {
       Mat D;
       PetscCall(MatDuplicate(A, MAT_COPY_VALUES, &D));
       PetscCall(MatScale(D, 0.5));
       PetscCall(MatCopy(D, A, SAME_NONZERO_PATTERN));
       return MatDestroy(&D);
     }},
    {"MatCopy DIFFERENT_NONZERO_PATTERN", [](Mat A, Mat X) { return MatCopy(X, A, DIFFERENT_NONZERO_PATTERN); }},
    {"MatSetPreallocationCOO + MatSetValuesCOO", [n](Mat A, Mat) {
       std::vector<PetscInt>    ci, cj;
       std::vector<PetscScalar> cv;
       for (PetscInt i = 0; i < n; ++i)
         for (PetscInt c : {i, (i + 3) % n, (i + n / 2) % n}) {
           ci.push_back(i);
           cj.push_back(c);
           cv.push_back(1.0 + (i + c) % 4);
         }
       PetscCall(MatSetPreallocationCOO(A, (PetscCount)ci.size(), ci.data(), cj.data()));
       return MatSetValuesCOO(A, cv.data(), INSERT_VALUES);
     }},
    {"MatSetValuesCOO ADD", [n](Mat A, Mat) {
       std::vector<PetscScalar> cv(3 * n, 0.5);
       return MatSetValuesCOO(A, cv.data(), ADD_VALUES);
     }},
    {"MatTranspose MAT_INPLACE_MATRIX", [](Mat A, Mat) { return MatTranspose(A, MAT_INPLACE_MATRIX, &A); }},
    {"MatRealPart", [](Mat A, Mat) { return MatRealPart(A); }},
    {"MatConjugate", [](Mat A, Mat) { return MatConjugate(A); }},
    {"MatFilter", [](Mat A, Mat) { return MatFilter(A, 1.2, PETSC_TRUE, PETSC_FALSE); }},
    {"MatSetRandom", [](Mat A, Mat) {
       PetscRandom r;
       PetscCall(PetscRandomCreate(PETSC_COMM_SELF, &r));
       PetscCall(PetscRandomSetSeed(r, 42)); // the same values for the aij and the aijpredict matrix
       PetscCall(PetscRandomSeed(r));
       PetscCall(MatSetRandom(A, r));
       return PetscRandomDestroy(&r);
     }},
    {"MatEliminateZeros", [](Mat A, Mat) {
       const PetscInt rows[] = {5, 6};
       PetscCall(MatSetOption(A, MAT_KEEP_NONZERO_PATTERN, PETSC_TRUE));
       PetscCall(MatZeroRows(A, 2, rows, 0.0, nullptr, nullptr)); // explicit zeros to eliminate
       PetscCall(MatSetOption(A, MAT_KEEP_NONZERO_PATTERN, PETSC_FALSE));
       return MatEliminateZeros(A, PETSC_FALSE);
     }},
    {"MatImaginaryPart", [](Mat A, Mat) { return MatImaginaryPart(A); }},
  };

  Mat A = laplacian_with_empty_rows(MATSEQAIJ, nx), B = laplacian_with_empty_rows(MATSEQAIJPREDICT, nx), X;
  ASSERT_PETSC(MatDuplicate(A, MAT_COPY_VALUES, &X));
  ASSERT_PETSC(MatScale(X, 0.5));
  std::vector<VecType> types{VECSEQ};
  if (have_gpu()) types.push_back(VECSEQCUDA);
  for (VecType vt : types) compare_products(A, B, vt, std::string("assembled [") + vt + "]");
  for (const auto& op : ops) {
    SCOPED_TRACE(op.name);
    ASSERT_NE(format_after_product(B), "cpu") << "the aijpredict matrix must multiply with its (device or host) copy";
    ASSERT_PETSC(op.apply(A, X));
    ASSERT_PETSC(op.apply(B, X));
    PetscBool same;
    ASSERT_PETSC(PetscObjectTypeCompare((PetscObject)B, MATSEQAIJPREDICT, &same));
    ASSERT_TRUE(same) << op.name << " changed the type";
    for (VecType vt : types) compare_products(A, B, vt, std::string(op.name) + " [" + vt + "]");
  }
  for (Mat* m : {&A, &B, &X}) MatDestroy(m);
}

// How often the device (or host) copy was rebuilt (AIJPredAnalyze) and refreshed in place (AIJPredValues).
void copy_events(int* analyses, int* refreshes)
{
  PetscLogEvent      analyze, values;
  PetscEventPerfInfo info;
  ASSERT_PETSC(PetscLogEventGetId("AIJPredAnalyze", &analyze));
  ASSERT_PETSC(PetscLogEventGetId("AIJPredValues", &values));
  ASSERT_PETSC(PetscLogEventGetPerfInfo(PETSC_DETERMINE, analyze, &info));
  *analyses = info.count;
  ASSERT_PETSC(PetscLogEventGetPerfInfo(PETSC_DETERMINE, values, &info));
  *refreshes = info.count;
}

TEST(PetscAIJPredict, SamePatternRefreshesValuesOnlyNewPatternRebuilds)
{
  // On a GPU: one fixed format, so that no deferred conversion adds an analysis event.
  if (have_gpu()) { ASSERT_PETSC(PetscOptionsSetValue(nullptr, "-mat_aijpredict_force", "cusparse_csr")); }
  Mat A = laplacian_with_empty_rows(MATSEQAIJ, 12), B = laplacian_with_empty_rows(MATSEQAIJPREDICT, 12);
  if (have_gpu()) { ASSERT_PETSC(PetscOptionsClearValue(nullptr, "-mat_aijpredict_force")); }
  int a0, v0, a1, v1;
  copy_events(&a0, &v0);
  compare_products(A, B, VECSEQ, "first assembly");
  copy_events(&a1, &v1);
  EXPECT_EQ(a1 - a0, 1) << "the first product builds the copy";
  EXPECT_EQ(v1 - v0, 0);
  for (Mat m : {A, B}) { // same pattern, new values
    for (PetscInt i = 0; i < 144; i += 2) {
      if (i % 7 != 6) { ASSERT_PETSC(MatSetValue(m, i, i, 9.0, INSERT_VALUES)); } // rows i % 7 == 6 are empty
    }
    ASSERT_PETSC(MatAssemblyBegin(m, MAT_FINAL_ASSEMBLY));
    ASSERT_PETSC(MatAssemblyEnd(m, MAT_FINAL_ASSEMBLY));
  }
  compare_products(A, B, VECSEQ, "same pattern");
  copy_events(&a0, &v0);
  EXPECT_EQ(a0 - a1, 0) << "a same-pattern reassembly must not rebuild the copy";
  EXPECT_EQ(v0 - v1, 1) << "a same-pattern reassembly refreshes the values once";
  compare_products(A, B, VECSEQ, "unchanged");
  copy_events(&a1, &v1);
  EXPECT_EQ(a1 - a0 + v1 - v0, 0) << "products of an unchanged matrix must not touch the copy";
  for (Mat m : {A, B}) { // a new nonzero
    ASSERT_PETSC(MatSetValue(m, 0, 143, 1.0, INSERT_VALUES));
    ASSERT_PETSC(MatAssemblyBegin(m, MAT_FINAL_ASSEMBLY));
    ASSERT_PETSC(MatAssemblyEnd(m, MAT_FINAL_ASSEMBLY));
  }
  compare_products(A, B, VECSEQ, "new pattern");
  copy_events(&a0, &v0);
  EXPECT_EQ(a0 - a1, 1) << "a new pattern rebuilds the copy";
  EXPECT_EQ(v0 - v1, 0);
  for (Mat* m : {&A, &B}) MatDestroy(m);
}

TEST(PetscAIJPredict, ReusedMatrixIsAnalysedInTheBackgroundAndStaysRight)
{
  if (!have_gpu()) GTEST_SKIP() << "the background steps run on the GPU path only (the same test runs on the device)";
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0 && CPU_COUNT(&cpus) < 2) GTEST_SKIP() << "one CPU: the plugin runs the steps in the product";
  // Enough expected products for the analysis and any conversion to pay at once (product 11).
  ASSERT_PETSC(PetscOptionsSetValue(nullptr, "-mat_aijpredict_expected_mults", "1e6"));
  ASSERT_PETSC(PetscOptionsSetValue(nullptr, "-mat_aijpredict_background", "true"));
  Mat A = laplacian_with_empty_rows(MATSEQAIJ, 300), B = laplacian_with_empty_rows(MATSEQAIJPREDICT, 300);
  ASSERT_PETSC(PetscOptionsClearValue(nullptr, "-mat_aijpredict_expected_mults"));
  ASSERT_PETSC(PetscOptionsClearValue(nullptr, "-mat_aijpredict_background"));
  // Every product before, while and after the step runs; values change (MatScale) while it may still run.
  for (int k = 0; k < 12; ++k) compare_products(A, B, VECSEQCUDA, "round " + std::to_string(k));
  ASSERT_PETSC(MatScale(A, -1.5));
  ASSERT_PETSC(MatScale(B, -1.5));
  for (int k = 12; k < 16; ++k) compare_products(A, B, VECSEQCUDA, "scaled, round " + std::to_string(k));
  const char* report = nullptr;
  ASSERT_PETSC(MatAIJPredictGetReport(B, &report)); // waits for a step still running
  ASSERT_NE(report, nullptr);
  EXPECT_NE(std::string(report).find("in the background"), std::string::npos) << report;
  compare_products(A, B, VECSEQCUDA, "after the report");
  compare_products(A, B, VECSEQ, "after the report [host vectors]");
  for (Mat* m : {&A, &B}) MatDestroy(m);
}

TEST(PetscAIJPredict, ReusedMatrixIsAnalysedStagedAndStaysRight)
{
  if (!have_gpu()) GTEST_SKIP() << "staged steps run on the GPU path only (the same test runs on the device)";
  // Small parts so that a conversion to sell_delta16 spans many products (-mat_aijpredict_force would
  // convert at the first product, not staged).
  ASSERT_PETSC(PetscOptionsSetValue(nullptr, "-mat_aijpredict_staged", "true"));
  ASSERT_PETSC(PetscOptionsSetValue(nullptr, "-mat_aijpredict_expected_mults", "1e6"));
  ASSERT_PETSC(PetscOptionsSetValue(nullptr, "-mat_aijpredict_stage_fraction", "0.01"));
  Mat A = laplacian_with_empty_rows(MATSEQAIJ, 300), B = laplacian_with_empty_rows(MATSEQAIJPREDICT, 300);
  for (const char* o : {"-mat_aijpredict_staged", "-mat_aijpredict_expected_mults", "-mat_aijpredict_stage_fraction"}) {
    ASSERT_PETSC(PetscOptionsClearValue(nullptr, o));
  }
  // Every product before, while and after the step; values change (MatScale) while it still runs.
  for (int k = 0; k < 16; ++k) compare_products(A, B, VECSEQCUDA, "round " + std::to_string(k));
  ASSERT_PETSC(MatScale(A, -1.5));
  ASSERT_PETSC(MatScale(B, -1.5));
  for (int k = 16; k < 60; ++k) compare_products(A, B, VECSEQCUDA, "scaled, round " + std::to_string(k));
  const char* report = nullptr;
  ASSERT_PETSC(MatAIJPredictGetReport(B, &report));
  ASSERT_NE(report, nullptr);
  EXPECT_NE(std::string(report).find("ran staged in"), std::string::npos) << report;
  compare_products(A, B, VECSEQCUDA, "after the report");
  compare_products(A, B, VECSEQ, "after the report [host vectors]");
  for (Mat* m : {&A, &B}) MatDestroy(m);
}

TEST(PetscAIJPredict, BindToCPUAndBack)
{
  Mat A = laplacian_with_empty_rows(MATSEQAIJ, 20), B = laplacian_with_empty_rows(MATSEQAIJPREDICT, 20);
  ASSERT_NE(format_after_product(B), "cpu");
  ASSERT_PETSC(MatBindToCPU(B, PETSC_TRUE));
  PetscBool bound;
  ASSERT_PETSC(MatBoundToCPU(B, &bound));
  EXPECT_TRUE(bound);
  EXPECT_EQ(format_after_product(B), "cpu");
  compare_products(A, B, VECSEQ, "bound");
  ASSERT_PETSC(MatScale(A, 3.0));
  ASSERT_PETSC(MatScale(B, 3.0));
  compare_products(A, B, VECSEQ, "scaled while bound");
  ASSERT_PETSC(MatBindToCPU(B, PETSC_FALSE));
  EXPECT_NE(format_after_product(B), "cpu");
  compare_products(A, B, VECSEQ, "unbound");
  if (have_gpu()) compare_products(A, B, VECSEQCUDA, "unbound [cuda]");
  for (Mat* m : {&A, &B}) MatDestroy(m);
}

TEST(PetscAIJPredict, DuplicateKeepsPrefixedOptionsAndHasItsOwnCopy)
{
  Mat A = laplacian_with_empty_rows(MATSEQAIJ, 16), B = laplacian_with_empty_rows(MATSEQAIJPREDICT, 16), D;
  ASSERT_PETSC(MatSetOptionsPrefix(B, "dup_"));
  ASSERT_PETSC(PetscOptionsSetValue(nullptr, "-dup_mat_aijpredict_use_gpu", "false"));
  ASSERT_PETSC(MatSetFromOptions(B));
  ASSERT_PETSC(PetscOptionsClearValue(nullptr, "-dup_mat_aijpredict_use_gpu"));
  EXPECT_EQ(format_after_product(B), "cpu") << "-dup_mat_aijpredict_use_gpu false after MatSetOptionsPrefix + MatSetFromOptions";
  ASSERT_PETSC(MatDuplicate(B, MAT_COPY_VALUES, &D));
  EXPECT_EQ(format_after_product(D), "cpu") << "MatDuplicate must keep the options";
  ASSERT_PETSC(MatDestroy(&D));

  // Independent copies: scaling the duplicate leaves the original's copy alone, and the other way round.
  Mat C = laplacian_with_empty_rows(MATSEQAIJPREDICT, 16), E, A2;
  ASSERT_NE(format_after_product(C), "cpu");
  ASSERT_PETSC(MatDuplicate(C, MAT_COPY_VALUES, &E));
  ASSERT_NE(format_after_product(E), "cpu");
  ASSERT_PETSC(MatDuplicate(A, MAT_COPY_VALUES, &A2));
  ASSERT_PETSC(MatScale(E, -4.0));
  ASSERT_PETSC(MatScale(A2, -4.0));
  compare_products(A, C, VECSEQ, "original after the duplicate was scaled");
  compare_products(A2, E, VECSEQ, "scaled duplicate");
  ASSERT_PETSC(MatShift(C, 1.0));
  ASSERT_PETSC(MatShift(A, 1.0));
  compare_products(A, C, VECSEQ, "shifted original");
  compare_products(A2, E, VECSEQ, "duplicate after the original was shifted");
  for (Mat* m : {&A, &B, &C, &E, &A2}) MatDestroy(m);
}

TEST(PetscAIJPredict, ConvertBothWaysAllReuseModes)
{
  Mat A = laplacian_with_empty_rows(MATSEQAIJ, 16), B, C, R;
  PetscBool same;
  ASSERT_PETSC(MatConvert(A, MATAIJPREDICT, MAT_INITIAL_MATRIX, &B));
  ASSERT_PETSC(PetscObjectTypeCompare((PetscObject)B, MATSEQAIJPREDICT, &same));
  EXPECT_TRUE(same);
  EXPECT_NE(format_after_product(B), "cpu");
  compare_products(A, B, VECSEQ, "aij -> aijpredict, MAT_INITIAL_MATRIX");
  ASSERT_PETSC(MatScale(A, 2.0));
  ASSERT_PETSC(MatConvert(A, MATAIJPREDICT, MAT_REUSE_MATRIX, &B));
  compare_products(A, B, VECSEQ, "aij -> aijpredict, MAT_REUSE_MATRIX");
  ASSERT_PETSC(MatConvert(B, MATAIJ, MAT_INITIAL_MATRIX, &C));
  ASSERT_PETSC(PetscObjectTypeCompare((PetscObject)C, MATSEQAIJ, &same));
  EXPECT_TRUE(same);
  compare_products(A, C, VECSEQ, "aijpredict -> aij, MAT_INITIAL_MATRIX");
  ASSERT_PETSC(MatScale(B, -1.0));
  ASSERT_PETSC(MatScale(A, -1.0));
  ASSERT_PETSC(MatConvert(B, MATSEQAIJ, MAT_REUSE_MATRIX, &C));
  compare_products(A, C, VECSEQ, "aijpredict -> aij, MAT_REUSE_MATRIX");
  ASSERT_PETSC(MatConvert(C, MATSEQAIJPREDICT, MAT_INPLACE_MATRIX, &C));
  ASSERT_PETSC(PetscObjectTypeCompare((PetscObject)C, MATSEQAIJPREDICT, &same));
  EXPECT_TRUE(same);
  EXPECT_NE(format_after_product(C), "cpu");
  compare_products(A, C, VECSEQ, "aij -> aijpredict, MAT_INPLACE_MATRIX");
  ASSERT_PETSC(MatConvert(C, MATAIJ, MAT_INPLACE_MATRIX, &C));
  ASSERT_PETSC(PetscObjectTypeCompare((PetscObject)C, MATSEQAIJ, &same));
  EXPECT_TRUE(same);
  compare_products(A, C, VECSEQ, "aijpredict -> aij, MAT_INPLACE_MATRIX");
  // MatSetType() on an assembled SeqAIJ matrix converts it (PETSc's subclass rule).
  ASSERT_PETSC(MatSetType(C, MATAIJPREDICT));
  ASSERT_PETSC(PetscObjectTypeCompare((PetscObject)C, MATSEQAIJPREDICT, &same));
  EXPECT_TRUE(same);
  compare_products(A, C, VECSEQ, "MatSetType on an assembled matrix");
  ASSERT_PETSC(MatDuplicate(C, MAT_DO_NOT_COPY_VALUES, &R));
  ASSERT_PETSC(MatZeroEntries(A));
  compare_products(A, R, VECSEQ, "MatDuplicate MAT_DO_NOT_COPY_VALUES");
  for (Mat* m : {&A, &B, &C, &R}) MatDestroy(m);
}

TEST(PetscAIJPredict, ViewAsciiInfoSaysWhereProductsRun)
{
  Mat         B = laplacian_with_empty_rows(MATSEQAIJPREDICT, 8);
  PetscViewer v;
  const char* file = "aijp_view_info.txt";
  (void)format_after_product(B);
  ASSERT_PETSC(PetscViewerASCIIOpen(PETSC_COMM_SELF, file, &v));
  ASSERT_PETSC(PetscViewerPushFormat(v, PETSC_VIEWER_ASCII_INFO));
  ASSERT_PETSC(MatView(B, v));
  ASSERT_PETSC(PetscViewerPopFormat(v));
  ASSERT_PETSC(PetscViewerDestroy(&v));
  std::ifstream     in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  EXPECT_NE(text.find("type: seqaijpredict"), std::string::npos) << text;
  EXPECT_NE(text.find("aijpredict: "), std::string::npos) << text;
  if (!have_gpu()) EXPECT_NE(text.find("host copy"), std::string::npos) << text;
  else EXPECT_NE(text.find("SpMV format"), std::string::npos) << text;
  std::remove(file);
  MatDestroy(&B);
}
}  // namespace

int main(int argc, char** argv)
{
  ::testing::InitGoogleTest(&argc, argv);
  if (PetscInitialize(&argc, &argv, nullptr, nullptr) != PETSC_SUCCESS) return 1;
  if (MatAIJPredictInitializePackage() != PETSC_SUCCESS) return 1;
  if (PetscLogDefaultBegin() != PETSC_SUCCESS) return 1; // event counts: values-only refresh vs rebuild
  // Without a GPU, multiply with a host copy refreshed like the device copy (see the top of this file).
  if (!have_gpu() && PetscOptionsSetValue(nullptr, "-mat_aijpredict_host_copy", "true") != PETSC_SUCCESS) return 1;
  const int rc = RUN_ALL_TESTS();
  if (PetscFinalize() != PETSC_SUCCESS) return 1;
  return rc;
}
