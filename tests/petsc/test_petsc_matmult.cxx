// MATSEQAIJPREDICT against MATSEQAIJ: MatMult, MatMultAdd, MatMultTranspose(Add) on every shared real matrix
// and the edge cases, with host vectors and (when a GPU is present) the VECCUDA vectors of MatCreateVecs,
// before and after value changes (MatScale, MatShift, new values through MatSetValues) and a new pattern.
// Without a GPU the aijpredict matrix runs its CPU fallback; the same comparisons must hold.
#include <petscaijpredict.h>
#include <petscvec.h>

#include <aijpredict/device.hpp>

#include "test_matrices.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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
  else EXPECT_STREQ(fmt, "cpu");
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

}  // namespace

int main(int argc, char** argv)
{
  ::testing::InitGoogleTest(&argc, argv);
  if (PetscInitialize(&argc, &argv, nullptr, nullptr) != PETSC_SUCCESS) return 1;
  if (MatAIJPredictInitializePackage() != PETSC_SUCCESS) return 1;
  const int rc = RUN_ALL_TESTS();
  if (PetscFinalize() != PETSC_SUCCESS) return 1;
  return rc;
}
