/*
   MATSEQAIJPREDICT: a SeqAIJ matrix that keeps a GPU copy in the storage format the aijpredict runtime
   predicts fastest, and runs MatMult, MatMultAdd, MatMultTranspose(Add) there.

   Modelled on PETSc's derived AIJ types (aijsell.c keeps a "shadow" copy rebuilt when the object state
   changes; aijcusparse.cu makes VECCUDA the default vector type). The host SeqAIJ arrays stay the master
   copy: every PETSc operation that changes values or pattern works unchanged, and the device copy is
   refreshed lazily at the next product by comparing the object state (values) and the nonzero state
   (pattern). Everything about formats lives in runtime/ and kernels/; this file is only the adapter.
*/
#include <petscaijpredict.h>
#include <petscdevice_cuda.h>
#include <petsc/private/matimpl.h>

#include <aijpredict/gpu_matrix.hpp>
#include <aijpredict/warmup.hpp>

#include <algorithm>
#include <memory>
#include <string>

#if defined(PETSC_USE_COMPLEX) || defined(PETSC_USE_64BIT_INDICES) || !(defined(PETSC_USE_REAL_DOUBLE) || defined(PETSC_USE_REAL_SINGLE))
  #define AIJP_PETSC_UNSUPPORTED_BUILD 1 /* complex scalars, 64-bit indices, or quad precision: CPU SeqAIJ path */
#endif

namespace {

using ops_mult    = PetscErrorCode (*)(Mat, Vec, Vec);
using ops_multadd = PetscErrorCode (*)(Mat, Vec, Vec, Vec);

struct Mat_SeqAIJPredict {
  /* The SeqAIJ implementations we override, kept as the CPU path (inode variants after assembly). */
  ops_mult       mult             = nullptr;
  ops_multadd    multadd          = nullptr;
  ops_mult       multtranspose    = nullptr;
  ops_multadd    multtransposeadd = nullptr;
  PetscErrorCode (*getdiagonal)(Mat, Vec)             = nullptr;
  PetscErrorCode (*assemblyend)(Mat, MatAssemblyType) = nullptr;
  PetscErrorCode (*destroy)(Mat)                      = nullptr;

  /* Options */
  std::string formats;   /* -mat_aijpredict_formats */
  std::string force;     /* -mat_aijpredict_force */
  std::string cache_dir; /* -mat_aijpredict_cache_dir */
  std::string model = "placeholder"; /* -mat_aijpredict_model (see aijp::context_options::model) */
  PetscBool   warmup  = PETSC_FALSE;
  PetscInt    defer_mults    = 10; /* -mat_aijpredict_defer_mults: products on cuSPARSE CSR before the analysis: a solve of <= 10 products never pays for one */
  PetscReal   expected_mults = 0; /* -mat_aijpredict_expected_mults: 0 = learn from use (products so far) */
  PetscBool   view    = PETSC_FALSE;
  PetscBool   use_gpu = PETSC_TRUE;

  /* GPU state */
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  std::unique_ptr<aijp::gpu_matrix<PetscScalar>> gpu;
#endif
  PetscObjectState state        = -1; /* object state when gpu was last synchronised */
  PetscObjectState nonzerostate = -1;
  bool             cpu_only     = false; /* decided once: no device, unsupported build, or a failure */
  std::string      cpu_reason;
  std::string      report;
  bool             reported = false;
  PetscScalar     *dx = nullptr, *dy = nullptr; /* staging for host vectors */
  PetscInt         nx = 0, ny = 0;
  PetscInt         mults      = 0; /* products since the last pattern change */
  PetscInt         next_check = 0; /* product count at which a deferred conversion is reconsidered */
};

PetscLogEvent AIJP_EVENT_ANALYZE, AIJP_EVENT_CONVERT, AIJP_EVENT_SPMV;
PetscBool     aijp_package_initialized = PETSC_FALSE;

#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
/* One context per process and device: model parameters from the per-device cache (or calibrated once). */
std::unique_ptr<aijp::context> aijp_context;
std::string                    aijp_context_key;
bool                           aijp_warmup_done = false;

/* The context of (cache directory, model); with -mat_aijpredict_warmup, runs the quick warm-up once per
   process when this GPU has no fitted coefficients yet. */
PetscErrorCode AIJPGetContext(const Mat_SeqAIJPredict *p, aijp::context **ctx)
{
  const std::string key = p->cache_dir + "|" + p->model;

  PetscFunctionBegin;
  if (!aijp_context || key != aijp_context_key) {
    aijp::context_options opts;
    opts.cache_dir = p->cache_dir;
    opts.model     = p->model;
    PetscCallCXX(aijp_context = std::make_unique<aijp::context>(opts));
    aijp_context_key = key;
    for (const auto &w : aijp_context->warnings()) PetscCall(PetscPrintf(PETSC_COMM_SELF, "WARNING: %s\n", w.c_str()));
    if (p->warmup && p->model == "placeholder") PetscCall(PetscInfo(nullptr, "aijpredict: -mat_aijpredict_warmup has no effect with -mat_aijpredict_model placeholder\n"));
    if (p->warmup && !aijp_warmup_done && p->model != "placeholder" && aijp_context->model_source().find("fitted on this GPU") == std::string::npos) {
      aijp::warmup_options wo;
      wo.cache_dir = p->cache_dir;
      wo.progress  = [](size_t done, size_t total, double s, const std::string &what) { (void)PetscInfo(nullptr, "aijpredict warm-up %zu/%zu (%.1f s): %s\n", done, total, s, what.c_str()); };
      PetscCall(PetscPrintf(PETSC_COMM_SELF, "aijpredict: -mat_aijpredict_warmup: fitting the models on this GPU (quick grid, about 30 s)...\n"));
      aijp::warmup_result r;
      PetscCallCXX(r = aijp::run_warmup(*aijp_context, wo));
      PetscCall(PetscPrintf(PETSC_COMM_SELF, "aijpredict: warm-up done in %.1f s (%zu samples), coefficients in %s\n", r.seconds, r.samples, r.cache_file.c_str()));
      aijp_warmup_done = true;
      PetscCallCXX(aijp_context = std::make_unique<aijp::context>(opts));
    }
    PetscCall(PetscInfo(nullptr, "aijpredict: %s\n", aijp_context->model_source().c_str()));
  }
  *ctx = aijp_context.get();
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode AIJPStaging(PetscScalar **buf, PetscInt *have, PetscInt need)
{
  PetscFunctionBegin;
  if (*have < need) {
    if (*buf) PetscCallCUDA(cudaFree(*buf));
    *buf = nullptr;
    PetscCallCUDA(cudaMalloc((void **)buf, sizeof(PetscScalar) * need));
    *have = need;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
#endif

PetscErrorCode AIJPFallBack(Mat A, Mat_SeqAIJPredict *p, const std::string &why)
{
  PetscFunctionBegin;
  p->cpu_only   = true;
  p->cpu_reason = why;
  PetscCall(PetscInfo(A, "aijpredict: %s; MatMult runs on the CPU (SeqAIJ)\n", why.c_str()));
  if (p->view && !p->reported) {
    PetscCall(PetscPrintf(PETSC_COMM_SELF, "aijpredict: %s; MatMult runs on the CPU (SeqAIJ)\n", why.c_str()));
    p->reported = true;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
PetscErrorCode AIJPReport(Mat A, Mat_SeqAIJPredict *p)
{
  PetscFunctionBegin;
  p->report = p->gpu->report().to_string();
  PetscCall(PetscInfo(A, "%s", p->report.c_str()));
  if (p->view) PetscCall(PetscPrintf(PETSC_COMM_SELF, "%s", p->report.c_str()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Called before each product: after defer_mults products the matrix has proved reused, so analyse it; a
   format whose conversion does not pay yet is reconsidered whenever the product count doubles, expecting
   as many products again as so far (or -mat_aijpredict_expected_mults, if larger). */
PetscErrorCode AIJPReuseStep(Mat A, Mat_SeqAIJPredict *p)
{
  cudaStream_t stream;

  PetscFunctionBegin;
  p->mults++;
  const auto &rep = p->gpu->report();
  if (rep.analyzed && !rep.deferred) PetscFunctionReturn(PETSC_SUCCESS);
  if (!rep.analyzed && p->mults <= p->defer_mults) PetscFunctionReturn(PETSC_SUCCESS);
  if (rep.analyzed && p->mults < p->next_check) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscGetCurrentCUDAStream(&stream));
  const double expected = std::max<double>(p->expected_mults, p->mults);
  if (!rep.analyzed) {
    aijp::context     *ctx = nullptr;
    aijp::plan_options opts;
    PetscCall(AIJPGetContext(p, &ctx));
    PetscCallCXX(opts.candidates = aijp::parse_format_list(p->formats));
    opts.expected_mults = expected;
    PetscCall(PetscLogEventBegin(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
    PetscCallCXX(p->gpu->analyze(*ctx, opts, stream));
    PetscCall(PetscLogEventEnd(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
    PetscCall(AIJPReport(A, p));
  } else {
    bool converted = false;
    PetscCall(PetscLogEventBegin(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
    PetscCallCXX(converted = p->gpu->convert_deferred(expected, stream));
    PetscCall(PetscLogEventEnd(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
    if (converted) PetscCall(AIJPReport(A, p));
  }
  p->next_check = 2 * p->mults;
  PetscFunctionReturn(PETSC_SUCCESS);
}
#endif

/* Brings the device copy up to date: new pattern -> new analysis and conversion; new values -> values only. */
PetscErrorCode MatSeqAIJPredictSync(Mat A, Mat_SeqAIJPredict *p)
{
  PetscFunctionBegin;
  if (p->cpu_only) PetscFunctionReturn(PETSC_SUCCESS);
#if defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  PetscCall(AIJPFallBack(A, p, "this PETSc build has complex scalars, 64-bit indices or a precision other than single/double"));
#else
  if (!p->use_gpu) {
    PetscCall(AIJPFallBack(A, p, "-mat_aijpredict_use_gpu false"));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscObjectState state;
  PetscCall(PetscObjectStateGet((PetscObject)A, &state));
  if (p->gpu && p->state == state && p->nonzerostate == A->nonzerostate) PetscFunctionReturn(PETSC_SUCCESS); /* the hot path */
  std::string why;
  if (!p->gpu && !aijp::device_available(&why)) {
    PetscCall(AIJPFallBack(A, p, why));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  const PetscInt *ai, *aj;
  PetscScalar    *aa;
  PetscMemType    mtype;
  PetscInt        m, n;
  PetscCall(MatGetLocalSize(A, &m, &n));
  PetscCall(MatSeqAIJGetCSRAndMemType(A, &ai, &aj, &aa, &mtype));
  PetscCheck(PetscMemTypeHost(mtype), PETSC_COMM_SELF, PETSC_ERR_PLIB, "aijpredict expects the SeqAIJ arrays on the host");
  cudaStream_t stream;
  PetscCall(PetscGetCurrentCUDAStream(&stream));

  if (p->gpu && p->nonzerostate == A->nonzerostate) {
    PetscCall(PetscLogEventBegin(AIJP_EVENT_CONVERT, A, 0, 0, 0));
    PetscCallCXX(p->gpu->update_values(aa, stream));
    PetscCall(PetscLogCpuToGpu(sizeof(PetscScalar) * ai[m]));
    PetscCall(PetscLogEventEnd(AIJP_EVENT_CONVERT, A, 0, 0, 0));
  } else {
    aijp::context *ctx = nullptr;
    PetscCall(AIJPGetContext(p, &ctx));
    aijp::plan_options opts;
    PetscCallCXX(opts.candidates = aijp::parse_format_list(p->formats));
    if (!p->force.empty()) PetscCallCXX(opts.forced = aijp::parse_format(p->force));
    /* Short solves never pay for an analysis: upload and run cuSPARSE CSR until the matrix is reused. */
    opts.analyze = p->defer_mults == 0 || !p->force.empty();
    opts.expected_mults = p->expected_mults;
    p->mults      = 0;
    p->next_check = 0;
    aijp::csr_view<PetscScalar> view{m, n, ai[m], ai, aj, aa};
    p->gpu.reset();
    PetscCall(PetscLogEventBegin(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
    try {
      p->gpu = std::make_unique<aijp::gpu_matrix<PetscScalar>>(*ctx, view, opts, stream);
    } catch (const aijp::device_out_of_memory &e) {
      PetscCall(PetscLogEventEnd(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
      PetscCall(AIJPFallBack(A, p, std::string("out of GPU memory (") + e.what() + ")"));
      PetscFunctionReturn(PETSC_SUCCESS);
    } catch (const aijp::not_supported &e) {
      PetscCall(PetscLogEventEnd(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
      PetscCall(AIJPFallBack(A, p, e.what()));
      PetscFunctionReturn(PETSC_SUCCESS);
    } catch (const std::exception &e) {
      SETERRQ(PETSC_COMM_SELF, PETSC_ERR_LIB, "aijpredict: %s", e.what());
    }
    PetscCall(PetscLogCpuToGpu((sizeof(PetscScalar) + sizeof(PetscInt)) * ai[m] + sizeof(PetscInt) * (m + 1)));
    PetscCall(PetscLogEventEnd(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
    if (p->gpu->report().analyzed) PetscCall(AIJPReport(A, p));
  }
  p->state        = state;
  p->nonzerostate = A->nonzerostate;
#endif
  PetscFunctionReturn(PETSC_SUCCESS);
}

#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
/* zz = A xx (+ yy when yy is given); transpose selects A^T. Host vectors are staged through device buffers. */
PetscErrorCode MatSeqAIJPredictApply(Mat A, Mat_SeqAIJPredict *p, Vec xx, Vec yy, Vec zz, bool transpose)
{
  const PetscScalar *x;
  PetscScalar       *z;
  PetscMemType       xm, zm;
  PetscInt           nin, nout;
  cudaStream_t       stream;

  PetscFunctionBegin;
  PetscCall(PetscGetCurrentCUDAStream(&stream));
  if (yy && yy != zz) PetscCall(VecCopy(yy, zz));
  PetscCall(VecGetLocalSize(xx, &nin));
  PetscCall(VecGetLocalSize(zz, &nout));
  PetscCall(VecGetArrayReadAndMemType(xx, &x, &xm));
  if (yy) PetscCall(VecGetArrayAndMemType(zz, &z, &zm));
  else PetscCall(VecGetArrayWriteAndMemType(zz, &z, &zm));

  const PetscScalar *dx = x;
  PetscScalar       *dz = z;
  if (!PetscMemTypeDevice(xm)) {
    PetscCall(AIJPStaging(&p->dx, &p->nx, nin));
    PetscCallCUDA(cudaMemcpyAsync(p->dx, x, sizeof(PetscScalar) * nin, cudaMemcpyHostToDevice, stream));
    PetscCall(PetscLogCpuToGpu(sizeof(PetscScalar) * nin));
    dx = p->dx;
  }
  if (!PetscMemTypeDevice(zm)) {
    PetscCall(AIJPStaging(&p->dy, &p->ny, nout));
    if (yy) {
      PetscCallCUDA(cudaMemcpyAsync(p->dy, z, sizeof(PetscScalar) * nout, cudaMemcpyHostToDevice, stream));
      PetscCall(PetscLogCpuToGpu(sizeof(PetscScalar) * nout));
    }
    dz = p->dy;
  }
  const PetscScalar beta = yy ? 1.0 : 0.0;
  PetscCall(PetscLogGpuTimeBegin());
  if (transpose) PetscCallCXX(p->gpu->apply_transpose(1.0, dx, beta, dz, stream));
  else PetscCallCXX(p->gpu->apply(1.0, dx, beta, dz, stream));
  PetscCall(PetscLogGpuTimeEnd());
  PetscCall(PetscLogGpuFlops(2.0 * p->gpu->nnz()));
  if (!PetscMemTypeDevice(zm)) {
    PetscCallCUDA(cudaMemcpyAsync(z, dz, sizeof(PetscScalar) * nout, cudaMemcpyDeviceToHost, stream));
    PetscCallCUDA(cudaStreamSynchronize(stream));
    PetscCall(PetscLogGpuToCpu(sizeof(PetscScalar) * nout));
  }
  PetscCall(VecRestoreArrayReadAndMemType(xx, &x));
  if (yy) PetscCall(VecRestoreArrayAndMemType(zz, &z));
  else PetscCall(VecRestoreArrayWriteAndMemType(zz, &z));
  PetscFunctionReturn(PETSC_SUCCESS);
}
#endif

Mat_SeqAIJPredict *AIJP(Mat A) { return static_cast<Mat_SeqAIJPredict *>(A->spptr); }

/* The four products: zz = op(A) xx (+ yy), on the GPU, or on the CPU path SeqAIJ installed. */
PetscErrorCode MatProduct_SeqAIJPredict(Mat A, Vec xx, Vec yy, Vec zz, bool transpose)
{
  Mat_SeqAIJPredict *p = AIJP(A);

  PetscFunctionBegin;
  PetscCall(MatSeqAIJPredictSync(A, p));
  if (p->cpu_only) {
    if (yy) PetscCall((*(transpose ? p->multtransposeadd : p->multadd))(A, xx, yy, zz));
    else PetscCall((*(transpose ? p->multtranspose : p->mult))(A, xx, zz));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  if (!transpose) PetscCall(AIJPReuseStep(A, p));
  PetscCall(PetscLogEventBegin(AIJP_EVENT_SPMV, A, xx, zz, 0));
  PetscCall(MatSeqAIJPredictApply(A, p, xx, yy, zz, transpose));
  PetscCall(PetscLogEventEnd(AIJP_EVENT_SPMV, A, xx, zz, 0));
#endif
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode MatMult_SeqAIJPredict(Mat A, Vec xx, Vec yy)
{
  return MatProduct_SeqAIJPredict(A, xx, nullptr, yy, false);
}
PetscErrorCode MatMultAdd_SeqAIJPredict(Mat A, Vec xx, Vec yy, Vec zz)
{
  return MatProduct_SeqAIJPredict(A, xx, yy, zz, false);
}
PetscErrorCode MatMultTranspose_SeqAIJPredict(Mat A, Vec xx, Vec yy)
{
  return MatProduct_SeqAIJPredict(A, xx, nullptr, yy, true);
}
PetscErrorCode MatMultTransposeAdd_SeqAIJPredict(Mat A, Vec xx, Vec yy, Vec zz)
{
  return MatProduct_SeqAIJPredict(A, xx, yy, zz, true);
}

PetscErrorCode MatGetDiagonal_SeqAIJPredict(Mat A, Vec v)
{
  Mat_SeqAIJPredict *p = AIJP(A);

  PetscFunctionBegin;
  PetscCall(MatSeqAIJPredictSync(A, p));
  if (p->cpu_only) {
    PetscCall((*p->getdiagonal)(A, v));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  PetscScalar *d;
  PetscMemType mtype;
  PetscInt     n;
  cudaStream_t stream;
  PetscCall(PetscGetCurrentCUDAStream(&stream));
  PetscCall(VecGetLocalSize(v, &n));
  PetscCheck(n == p->gpu->rows(), PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "vector of local size %" PetscInt_FMT " for a matrix of %" PetscInt_FMT " rows", n, (PetscInt)p->gpu->rows());
  PetscCall(VecGetArrayWriteAndMemType(v, &d, &mtype));
  if (PetscMemTypeDevice(mtype)) {
    PetscCallCXX(p->gpu->diagonal(d, stream));
  } else {
    PetscCall(AIJPStaging(&p->dy, &p->ny, n));
    PetscCallCXX(p->gpu->diagonal(p->dy, stream));
    PetscCallCUDA(cudaMemcpyAsync(d, p->dy, sizeof(PetscScalar) * n, cudaMemcpyDeviceToHost, stream));
    PetscCallCUDA(cudaStreamSynchronize(stream));
    PetscCall(PetscLogGpuToCpu(sizeof(PetscScalar) * n));
  }
  PetscCall(VecRestoreArrayWriteAndMemType(v, &d));
#endif
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Installs our products over whatever SeqAIJ put there (assembly may switch to the inode variants, which
   then become the CPU path). */
void AIJPInstallOps(Mat A, Mat_SeqAIJPredict *p)
{
  if (A->ops->mult != MatMult_SeqAIJPredict) {
    p->mult        = A->ops->mult;
    A->ops->mult   = MatMult_SeqAIJPredict;
  }
  if (A->ops->multadd != MatMultAdd_SeqAIJPredict) {
    p->multadd      = A->ops->multadd;
    A->ops->multadd = MatMultAdd_SeqAIJPredict;
  }
  if (A->ops->multtranspose != MatMultTranspose_SeqAIJPredict) {
    p->multtranspose      = A->ops->multtranspose;
    A->ops->multtranspose = MatMultTranspose_SeqAIJPredict;
  }
  if (A->ops->getdiagonal != MatGetDiagonal_SeqAIJPredict) {
    p->getdiagonal      = A->ops->getdiagonal;
    A->ops->getdiagonal = MatGetDiagonal_SeqAIJPredict;
  }
  if (A->ops->multtransposeadd != MatMultTransposeAdd_SeqAIJPredict) {
    p->multtransposeadd      = A->ops->multtransposeadd;
    A->ops->multtransposeadd = MatMultTransposeAdd_SeqAIJPredict;
  }
}

PetscErrorCode MatAssemblyEnd_SeqAIJPredict(Mat A, MatAssemblyType mode)
{
  Mat_SeqAIJPredict *p = AIJP(A);

  PetscFunctionBegin;
  PetscCall((*p->assemblyend)(A, mode));
  if (mode == MAT_FLUSH_ASSEMBLY) PetscFunctionReturn(PETSC_SUCCESS);
  AIJPInstallOps(A, p);
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode AIJPFreeDeviceData(Mat_SeqAIJPredict *p)
{
  PetscFunctionBegin;
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  p->gpu.reset();
  if (p->dx) PetscCallCUDA(cudaFree(p->dx));
  if (p->dy) PetscCallCUDA(cudaFree(p->dy));
#endif
  p->dx = p->dy = nullptr;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode MatConvert_SeqAIJPredict_SeqAIJ(Mat A, MatType, MatReuse reuse, Mat *newmat)
{
  Mat                B = *newmat;
  Mat_SeqAIJPredict *p;

  PetscFunctionBegin;
  if (reuse == MAT_INITIAL_MATRIX) PetscCall(MatDuplicate(A, MAT_COPY_VALUES, &B));
  p                         = AIJP(B);
  B->ops->mult              = p->mult;
  B->ops->multadd           = p->multadd;
  B->ops->multtranspose     = p->multtranspose;
  B->ops->multtransposeadd  = p->multtransposeadd;
  B->ops->getdiagonal       = p->getdiagonal;
  B->ops->assemblyend       = p->assemblyend;
  B->ops->destroy           = p->destroy;
  PetscCall(AIJPFreeDeviceData(p));
  delete p;
  B->spptr = nullptr;
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatConvert_seqaijpredict_seqaij_C", nullptr));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatAIJPredictGetFormat_C", nullptr));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatAIJPredictGetReport_C", nullptr));
  PetscCall(PetscFree(B->defaultvectype));
  PetscCall(PetscStrallocpy(VECSTANDARD, &B->defaultvectype));
  PetscCall(PetscObjectChangeTypeName((PetscObject)B, MATSEQAIJ));
  *newmat = B;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode MatDestroy_SeqAIJPredict(Mat A)
{
  Mat_SeqAIJPredict *p = AIJP(A);
  PetscErrorCode (*destroy)(Mat);

  PetscFunctionBegin;
  destroy = p ? p->destroy : A->ops->destroy;
  if (p) {
    PetscCall(AIJPFreeDeviceData(p));
    delete p;
    A->spptr = nullptr;
  }
  PetscCall(PetscObjectComposeFunction((PetscObject)A, "MatConvert_seqaijpredict_seqaij_C", nullptr));
  PetscCall(PetscObjectComposeFunction((PetscObject)A, "MatAIJPredictGetFormat_C", nullptr));
  PetscCall(PetscObjectComposeFunction((PetscObject)A, "MatAIJPredictGetReport_C", nullptr));
  PetscCall(PetscObjectChangeTypeName((PetscObject)A, MATSEQAIJ));
  PetscCall((*destroy)(A));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode MatAIJPredictGetFormat_SeqAIJPredict(Mat A, const char **fmt)
{
  Mat_SeqAIJPredict *p = AIJP(A);

  PetscFunctionBegin;
  *fmt = "cpu";
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  if (!p->cpu_only && p->gpu) *fmt = aijp::format_name(p->gpu->format());
#endif
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode MatAIJPredictGetReport_SeqAIJPredict(Mat A, const char **report)
{
  Mat_SeqAIJPredict *p = AIJP(A);

  PetscFunctionBegin;
  *report = p->cpu_only ? p->cpu_reason.c_str() : (p->report.empty() ? nullptr : p->report.c_str());
  PetscFunctionReturn(PETSC_SUCCESS);
}

std::string AIJPFormatHelp()
{
  std::string s;
  for (auto f : aijp::all_formats()) s += std::string(s.empty() ? "" : ", ") + aijp::format_name(f);
  return s;
}

PetscErrorCode MatSeqAIJPredictSetFromOptions_Private(Mat B, Mat_SeqAIJPredict *p)
{
  char      formats[256] = "", force[64] = "", dir[PETSC_MAX_PATH_LEN] = "", model[64] = "";
  PetscBool set;

  PetscFunctionBegin;
  const std::string names = AIJPFormatHelp();
  PetscOptionsBegin(PetscObjectComm((PetscObject)B), ((PetscObject)B)->prefix, "AIJPredict options", "Mat");
  PetscCall(PetscOptionsString("-mat_aijpredict_formats", ("Comma-separated candidate storage formats (" + names + "); default: all").c_str(), "MatCreateSeqAIJPredict", formats, formats, sizeof(formats), &set));
  if (set) p->formats = formats;
  PetscCall(PetscOptionsString("-mat_aijpredict_force", ("Use this storage format without prediction (" + names + ")").c_str(), "MatCreateSeqAIJPredict", force, force, sizeof(force), &set));
  if (set) p->force = force;
  PetscCall(PetscOptionsString("-mat_aijpredict_cache_dir", "Directory of the per-GPU coefficient cache (default $AIJPREDICT_CACHE_DIR, else $XDG_CACHE_HOME/aijpredict)", "MatCreateSeqAIJPredict", dir, dir, sizeof(dir), &set));
  if (set) p->cache_dir = dir;
  PetscCall(PetscOptionsString("-mat_aijpredict_model", "Performance model ranking the formats: placeholder (calibrated bandwidth + serial-row model, default), aijp (fitted on this GPU by the warm-up), guo_wang, wang_gu_li_normal, wang_gu_li_uniform", "MatCreateSeqAIJPredict", p->model.c_str(), model, sizeof(model), &set));
  if (set) p->model = model;
  PetscCall(PetscOptionsBool("-mat_aijpredict_warmup", "If this GPU has no fitted coefficients yet, run the quick warm-up (about 30 s) once and store them in the cache", "MatCreateSeqAIJPredict", p->warmup, &p->warmup, nullptr));
  PetscCall(PetscOptionsInt("-mat_aijpredict_defer_mults", "Products run on cuSPARSE CSR before the matrix is analysed (0: analyse at the first product)", "MatCreateSeqAIJPredict", p->defer_mults, &p->defer_mults, nullptr));
  PetscCheck(p->defer_mults >= 0, PetscObjectComm((PetscObject)B), PETSC_ERR_ARG_OUTOFRANGE, "-mat_aijpredict_defer_mults must be >= 0, got %" PetscInt_FMT, p->defer_mults);
  PetscCall(PetscOptionsReal("-mat_aijpredict_expected_mults", "Products expected with this matrix: a format is converted to only if its predicted saving times this pays for the conversion (0: as many as so far)", "MatCreateSeqAIJPredict", p->expected_mults, &p->expected_mults, nullptr));
  PetscCheck(p->expected_mults >= 0, PetscObjectComm((PetscObject)B), PETSC_ERR_ARG_OUTOFRANGE, "-mat_aijpredict_expected_mults must be >= 0");
  PetscCall(PetscOptionsBool("-mat_aijpredict_view", "Print the row statistics, each format's predicted time and the choice", "MatCreateSeqAIJPredict", p->view, &p->view, nullptr));
  PetscCall(PetscOptionsBool("-mat_aijpredict_use_gpu", "Run the products on the GPU (false: SeqAIJ on the CPU)", "MatCreateSeqAIJPredict", p->use_gpu, &p->use_gpu, nullptr));
  PetscOptionsEnd();
  /* Reject bad values now, with the option's name, rather than at the first MatMult. */
  try {
    (void)aijp::parse_format_list(p->formats);
    if (!p->force.empty()) (void)aijp::parse_format(p->force);
    if (p->model != "placeholder") (void)aijp::model::make_model(p->model);
  } catch (const std::exception &e) {
    SETERRQ(PetscObjectComm((PetscObject)B), PETSC_ERR_ARG_OUTOFRANGE, "aijpredict: bad -mat_aijpredict_formats, -mat_aijpredict_force or -mat_aijpredict_model: %s", e.what());
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

} // namespace

/* Converts a SeqAIJ matrix into a SeqAIJPredict one (in place or a new matrix). */
PETSC_INTERN PetscErrorCode MatConvert_SeqAIJ_SeqAIJPredict(Mat A, MatType type, MatReuse reuse, Mat *newmat)
{
  Mat                B = *newmat;
  Mat_SeqAIJPredict *p;
  PetscBool          sametype;

  PetscFunctionBegin;
  if (reuse == MAT_INITIAL_MATRIX) PetscCall(MatDuplicate(A, MAT_COPY_VALUES, &B));
  PetscCall(PetscObjectTypeCompare((PetscObject)A, type, &sametype));
  if (sametype) {
    *newmat = B;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(MatAIJPredictInitializePackage());
  p        = new Mat_SeqAIJPredict();
  B->spptr = p;

  p->assemblyend      = B->ops->assemblyend;
  p->destroy          = B->ops->destroy;
  B->ops->assemblyend = MatAssemblyEnd_SeqAIJPredict;
  B->ops->destroy     = MatDestroy_SeqAIJPredict;
  AIJPInstallOps(B, p);

  PetscCall(MatSeqAIJPredictSetFromOptions_Private(B, p));
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  /* Vectors from MatCreateVecs live on the GPU when there is one, as with aijcusparse. */
  if (p->use_gpu && aijp::device_available()) {
    PetscCall(PetscFree(B->defaultvectype));
    PetscCall(PetscStrallocpy(VECCUDA, &B->defaultvectype));
  }
#endif
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatConvert_seqaijpredict_seqaij_C", MatConvert_SeqAIJPredict_SeqAIJ));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatAIJPredictGetFormat_C", MatAIJPredictGetFormat_SeqAIJPredict));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatAIJPredictGetReport_C", MatAIJPredictGetReport_SeqAIJPredict));
  PetscCall(PetscObjectChangeTypeName((PetscObject)B, MATSEQAIJPREDICT));
  *newmat = B;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
   MATSEQAIJPREDICT - MATSEQAIJPREDICT = "seqaijpredict" - A `MATSEQAIJ` matrix whose products run on the GPU in
   the storage format the aijpredict runtime predicts fastest for this matrix on this GPU.

   Options Database Keys:
+  -mat_type aijpredict             - sets the matrix type to aijpredict (seqaijpredict on one process)
.  -mat_aijpredict_formats <list>   - candidate formats (comma-separated)
.  -mat_aijpredict_force <format>   - skip the prediction and use this format
.  -mat_aijpredict_cache_dir <dir>  - directory of the per-GPU coefficient cache
.  -mat_aijpredict_model <name>     - performance model: placeholder (default), aijp, guo_wang, wang_gu_li_normal, wang_gu_li_uniform
.  -mat_aijpredict_warmup           - fit the models on this GPU first if it has no fitted coefficients (quick warm-up)
.  -mat_aijpredict_defer_mults <k>  - products on cuSPARSE CSR before the analysis (default 10; 0: at once)
.  -mat_aijpredict_expected_mults <n> - products expected; conversion only when it pays (default: as many as so far)
.  -mat_aijpredict_use_gpu <bool>   - false runs everything on the CPU like `MATSEQAIJ`
-  -mat_aijpredict_view             - print the statistics, the prediction of every format, and the choice

  Level: beginner

.seealso: `MatCreateSeqAIJPredict()`, `MATAIJCUSPARSE`, `MATSEQAIJ`
M*/
PETSC_EXTERN PetscErrorCode MatCreate_SeqAIJPredict(Mat A)
{
  PetscFunctionBegin;
  PetscCall(MatSetType(A, MATSEQAIJ));
  PetscCall(MatConvert_SeqAIJ_SeqAIJPredict(A, MATSEQAIJPREDICT, MAT_INPLACE_MATRIX, &A));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* MATMPIAIJPREDICT: an MPIAIJ matrix whose diagonal and off-diagonal blocks are MATSEQAIJPREDICT, so each
   block is analysed and converted on its own (they differ: a stencil's diagonal block is regular, its
   off-diagonal block has a few entries per boundary row). MPIAIJ's MatMult starts the ghost scatter, runs
   the diagonal block's product while it is in flight, then adds the off-diagonal block's product. */
using mpiaij_prealloc = PetscErrorCode (*)(Mat, PetscInt, const PetscInt[], PetscInt, const PetscInt[]);
static mpiaij_prealloc aijp_mpiaij_prealloc = nullptr; /* MPIAIJ's own, the same for every MPIAIJ matrix */

static PetscErrorCode MatMPIAIJSetPreallocation_MPIAIJPredict(Mat B, PetscInt d_nz, const PetscInt d_nnz[], PetscInt o_nz, const PetscInt o_nnz[])
{
  Mat             Ad, Ao;
  const PetscInt *colmap;

  PetscFunctionBegin;
  PetscCall((*aijp_mpiaij_prealloc)(B, d_nz, d_nnz, o_nz, o_nnz));
  PetscCall(MatMPIAIJGetSeqAIJ(B, &Ad, &Ao, &colmap));
  PetscCall(MatConvert_SeqAIJ_SeqAIJPredict(Ad, MATSEQAIJPREDICT, MAT_INPLACE_MATRIX, &Ad));
  PetscCall(MatConvert_SeqAIJ_SeqAIJPredict(Ao, MATSEQAIJPREDICT, MAT_INPLACE_MATRIX, &Ao));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
   MATMPIAIJPREDICT - MATMPIAIJPREDICT = "mpiaijpredict" - A `MATMPIAIJ` matrix whose diagonal and off-diagonal
   blocks are `MATSEQAIJPREDICT`: each block's products run on the GPU in the format predicted fastest for it.
   `-mat_type aijpredict` gives this type on more than one process. Options as for `MATSEQAIJPREDICT`.

  Level: beginner

.seealso: `MATSEQAIJPREDICT`, `MATMPIAIJCUSPARSE`, `MATMPIAIJ`
M*/
PETSC_EXTERN PetscErrorCode MatCreate_MPIAIJPredict(Mat A)
{
  PetscFunctionBegin;
  PetscCall(MatAIJPredictInitializePackage());
  PetscCall(MatSetType(A, MATMPIAIJ));
  if (!aijp_mpiaij_prealloc) {
    PetscErrorCode (*f)(Mat, PetscInt, const PetscInt[], PetscInt, const PetscInt[]) = nullptr;
    PetscCall(PetscObjectQueryFunction((PetscObject)A, "MatMPIAIJSetPreallocation_C", &f));
    PetscCheck(f, PetscObjectComm((PetscObject)A), PETSC_ERR_PLIB, "MPIAIJ has no MatMPIAIJSetPreallocation_C");
    aijp_mpiaij_prealloc = f;
  }
  PetscCall(PetscObjectComposeFunction((PetscObject)A, "MatMPIAIJSetPreallocation_C", MatMPIAIJSetPreallocation_MPIAIJPredict));
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  if (aijp::device_available()) {
    PetscCall(PetscFree(A->defaultvectype));
    PetscCall(PetscStrallocpy(VECCUDA, &A->defaultvectype));
  }
#endif
  PetscCall(PetscObjectChangeTypeName((PetscObject)A, MATMPIAIJPREDICT));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode MatCreateSeqAIJPredict(MPI_Comm comm, PetscInt m, PetscInt n, PetscInt nz, const PetscInt nnz[], Mat *A)
{
  PetscFunctionBegin;
  PetscCall(MatCreate(comm, A));
  PetscCall(MatSetSizes(*A, m, n, m, n));
  PetscCall(MatSetType(*A, MATSEQAIJPREDICT));
  PetscCall(MatSeqAIJSetPreallocation(*A, nz, nnz));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode MatAIJPredictGetFormat(Mat A, const char **fmt)
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(A, MAT_CLASSID, 1);
  PetscAssertPointer(fmt, 2);
  *fmt = nullptr;
  PetscUseMethod(A, "MatAIJPredictGetFormat_C", (Mat, const char **), (A, fmt));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode MatAIJPredictGetReport(Mat A, const char **report)
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(A, MAT_CLASSID, 1);
  PetscAssertPointer(report, 2);
  *report = nullptr;
  PetscUseMethod(A, "MatAIJPredictGetReport_C", (Mat, const char **), (A, report));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode MatAIJPredictFinalizePackage(void)
{
  PetscFunctionBegin;
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  aijp_context.reset();
#endif
  aijp_package_initialized = PETSC_FALSE;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode MatAIJPredictInitializePackage(void)
{
  PetscFunctionBegin;
  if (aijp_package_initialized) PetscFunctionReturn(PETSC_SUCCESS);
  aijp_package_initialized = PETSC_TRUE;
  PetscCall(MatRegister(MATSEQAIJPREDICT, MatCreate_SeqAIJPredict));
  PetscCall(MatRegister(MATMPIAIJPREDICT, MatCreate_MPIAIJPredict));
  PetscCall(MatRegisterRootName(MATAIJPREDICT, MATSEQAIJPREDICT, MATMPIAIJPREDICT));
  PetscCall(PetscLogEventRegister("AIJPredAnalyze", MAT_CLASSID, &AIJP_EVENT_ANALYZE));
  PetscCall(PetscLogEventRegister("AIJPredValues", MAT_CLASSID, &AIJP_EVENT_CONVERT));
  PetscCall(PetscLogEventRegister("AIJPredSpMV", MAT_CLASSID, &AIJP_EVENT_SPMV));
  PetscCall(PetscRegisterFinalize(MatAIJPredictFinalizePackage));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Called by PETSc when the library is loaded with -dll_append / -dll_prepend. */
PetscErrorCode PetscDLLibraryRegister_aijpredict(void)
{
  PetscFunctionBegin;
  PetscCall(MatAIJPredictInitializePackage());
  PetscFunctionReturn(PETSC_SUCCESS);
}
