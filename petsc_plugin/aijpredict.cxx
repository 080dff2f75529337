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
#include <chrono>
#include <memory>
#include <cstring>
#include <set>
#include <stdexcept>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__)
  #include <sched.h>
#endif

#if defined(PETSC_USE_COMPLEX) || defined(PETSC_USE_64BIT_INDICES) || !(defined(PETSC_USE_REAL_DOUBLE) || defined(PETSC_USE_REAL_SINGLE))
  #define AIJP_PETSC_UNSUPPORTED_BUILD 1 /* complex scalars, 64-bit indices, or quad precision: CPU SeqAIJ path */
#endif

namespace {

using ops_mult    = PetscErrorCode (*)(Mat, Vec, Vec);
using ops_multadd = PetscErrorCode (*)(Mat, Vec, Vec, Vec);

/* The -mat_aijpredict_* options of one matrix; copied by MatDuplicate(). */
struct AIJPOptions {
  std::string formats;               /* -mat_aijpredict_formats */
  std::vector<aijp::format_id> candidates = aijp::all_formats(); /* those formats, parsed once (AIJPOptionsParse) */
  std::string force;                 /* -mat_aijpredict_force */
  std::string cache_dir;             /* -mat_aijpredict_cache_dir */
  std::string model = "placeholder"; /* -mat_aijpredict_model (see aijp::context_options::model) */
  PetscBool   warmup         = PETSC_FALSE;
  PetscInt    defer_mults    = 10; /* -mat_aijpredict_defer_mults: products on cuSPARSE CSR before the analysis: a solve of <= 10 products never pays for one */
  PetscReal   expected_mults = 0;  /* -mat_aijpredict_expected_mults: 0 = learn from use (products so far) */
  PetscBool   view           = PETSC_FALSE;
  PetscBool   use_gpu        = PETSC_TRUE;
  PetscBool   host_copy      = PETSC_FALSE; /* -mat_aijpredict_host_copy: without a GPU, emulate the device copy on the host */
  PetscBool   online         = PETSC_TRUE;  /* -mat_aijpredict_online: time sampled products, refine the model, explore the runner-up, then cuSPARSE CSR (ALG2 when it runs), once each */
  PetscBool   preload        = PETSC_TRUE;  /* -mat_aijpredict_preload: load the library's CUDA modules (PetscScalar's) when the per-process context is made, not inside the first product of each format */
  PetscBool   launch_gap     = PETSC_FALSE; /* -mat_aijpredict_launch_gap: time the gap between back-to-back kernels when the context is made (aijp::context_options::measure_launch_gap) */
  PetscBool   partition      = PETSC_TRUE;  /* -mat_aijpredict_partition: row-partitioned multi-format plans when they pay */
  PetscBool   background     = PETSC_FALSE; /* -mat_aijpredict_background: analyse and convert a reused matrix on a worker thread */
  PetscBool   staged         = PETSC_TRUE;  /* -mat_aijpredict_staged: analyse and convert a reused matrix in parts over the next products */
  PetscBool   prefetch       = PETSC_TRUE;  /* -mat_aijpredict_prefetch: issue the analysis' device passes in the upload's solve, read them back in its later products */
  PetscBool   prefetch_side  = PETSC_FALSE; /* -mat_aijpredict_prefetch_stream: those passes on a stream of their own (lowest priority) */
  PetscBool   host_bound     = PETSC_TRUE;  /* -mat_aijpredict_host_bound_start: csr_vector before the analysis where predicted no slower (gpu_matrix::host_bound_start) */
  PetscReal   host_bound_us  = 25;          /* -mat_aijpredict_host_bound_start_us: only where cuSPARSE CSR is predicted at most this (plan_options::host_bound_start_us) */
  PetscBool   host_worker    = PETSC_TRUE;  /* -mat_aijpredict_host_worker: a staged step's stages without CUDA calls run on the step worker (needs a second CPU) */
  PetscBool   first_solve    = PETSC_TRUE;  /* -mat_aijpredict_first_solve_analysis: with prefetch and host_worker, analyse in the upload's solve */
  PetscReal   first_convert  = 200;         /* -mat_aijpredict_first_solve_convert_us: that analysis converts at once below this estimate */
  PetscBool   worker_convert = PETSC_TRUE;  /* -mat_aijpredict_worker_convert: that conversion runs on the step worker's stream when a builder makes it */
  PetscReal   stage_fraction = 0.03;        /* -mat_aijpredict_stage_fraction: a part's share of a product's predicted time */
  PetscReal   stage_duty     = 0.01;        /* -mat_aijpredict_stage_duty: the parts' share of the wall time (host); default AIJPDefaultStageDuty */
  PetscBool   stage_duty_set = PETSC_FALSE; /* given as an option (else the default follows -mat_aijpredict_host_worker and the CPUs) */
  PetscReal   stage_overlap  = 0.0;         /* -mat_aijpredict_stage_overlap: share of a product's predicted time a part overlaps */
  PetscReal   reserve        = 1.0;         /* -mat_aijpredict_reserve: layout reserve beside the CSR copy, a fraction of its bytes */
  PetscBool   upload_pool    = PETSC_TRUE;  /* -mat_aijpredict_upload_pool: the CSR copy from a pool that keeps destroyed matrices' blocks */
  PetscReal   free_band      = 0.15;        /* -mat_aijpredict_free_band: online::policy::free_band */
  PetscInt    sample_max     = 256;         /* -mat_aijpredict_online_sample_max: online::policy::sample_every_max */
  PetscInt    first_spacing  = 8;           /* -mat_aijpredict_online_first_spacing: online::policy::sample_first_spacing */
  PetscReal   trace_ms       = 0.25;        /* -mat_aijpredict_trace_ms: under -info, report each product whose host time exceeds it */
  PetscBool   trace_buffer   = PETSC_FALSE; /* -mat_aijpredict_trace_buffer: keep those reports in memory, print them at MatDestroy */
  PetscReal   upload_share   = 0.1;         /* -mat_aijpredict_upload_share: analyse at the upload when the analysis is at most this share of it */
};

/* Where the products of one matrix run; decided at the first product. */
enum class AIJPMode { undecided, gpu, cpu, host_copy };

struct Mat_SeqAIJPredict {
  /* The SeqAIJ implementations we override, kept as the CPU path (inode variants after assembly). */
  ops_mult       mult             = nullptr;
  ops_multadd    multadd          = nullptr;
  ops_mult       multtranspose    = nullptr;
  ops_multadd    multtransposeadd = nullptr;
  PetscErrorCode (*getdiagonal)(Mat, Vec)                         = nullptr;
  PetscErrorCode (*assemblyend)(Mat, MatAssemblyType)             = nullptr;
  PetscErrorCode (*destroy)(Mat)                                  = nullptr;
  PetscErrorCode (*duplicate)(Mat, MatDuplicateOption, Mat *)     = nullptr;
  PetscErrorCode (*view)(Mat, PetscViewer)                        = nullptr;
  PetscErrorCode (*setfromoptions)(Mat, PetscOptionItems)         = nullptr;

  AIJPOptions opt;

  /* Device (or emulated device) copy */
  AIJPMode mode = AIJPMode::undecided;
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  std::unique_ptr<aijp::gpu_matrix<PetscScalar>> gpu;
#endif
  /* -mat_aijpredict_host_copy: the copy the GPU would hold, kept on the host and refreshed by the same state
     checks, so that a stale copy shows up as a wrong product (or an error) on a machine without a GPU. */
  std::vector<PetscInt>    hi, hj;
  std::vector<PetscScalar> ha;
  bool             have_copy    = false; /* the device (or host) copy exists */
  PetscObjectState state        = -1;    /* object state when the copy was last synchronised */
  PetscObjectState nonzerostate = -1;
  std::string      cpu_reason;
  std::string      report;
  bool             reported = false;
  PetscScalar     *dx = nullptr, *dy = nullptr; /* staging for host vectors */
  PetscInt         nx = 0, ny = 0;
  PetscInt         mults      = 0; /* products since the last pattern change */
  PetscInt         next_check = 0; /* product count at which a deferred analysis, conversion or plan is reconsidered */
  PetscBool        analysis_waits = PETSC_FALSE; /* the analysis was put off (said once with PetscInfo) */
  double           start_us       = 0;           /* host time of the last start_background (AIJPStep) */
  PetscInt         step_begun     = 0;           /* product count when the background step running now began */
  PetscBool        background_said = PETSC_FALSE; /* said once that one CPU rules out background steps */
  /* -mat_aijpredict_trace_buffer: the traced products (see MatProduct_SeqAIJPredict), printed at MatDestroy. */
  struct traced_product {
    PetscInt    mult;                    /* the product's count (p->mults) */
    PetscInt    since_start;             /* products since the running or last step began (-1: none yet) */
    double      gap_us;                  /* host time since the previous product returned */
    double      reuse_us, apply_us, step_us;
    bool        stepping;                /* a step was running when the product was queued */
    std::string stage;                   /* the staged step's part run in this product, an exploration */
  };
  std::vector<traced_product>           trace;
  PetscInt                              trace_dropped = 0;
  std::chrono::steady_clock::time_point trace_last{}; /* when the previous product returned */
  double install_split_us[4] = {0, 0, 0, 0};           /* traced: AIJPInstallStep's entry to its event, the event's begin, the poll, the event's end */
};

PetscLogEvent         AIJP_EVENT_ANALYZE, AIJP_EVENT_CONVERT, AIJP_EVENT_SPMV;
std::set<std::string> aijp_fallbacks_said; /* CPU fallback reasons already reported with PetscInfo */
PetscBool     aijp_package_initialized = PETSC_FALSE;
bool          aijp_defer_context       = false; /* converting the blocks of an MPI matrix: AIJPCollectiveContext follows */

#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
/* One context per process and device: model parameters from the per-device cache (or calibrated once). */
/* Shared: a background analysis (gpu_matrix::start_background) keeps the context it started with. */
std::shared_ptr<aijp::context> aijp_context;
/* The options the context was made with (those that make a context: AIJPContextMadeFor compares them). */
struct AIJPContextKey {
  std::string cache_dir, model;
  bool        online = false, preload = false, launch_gap = false;
};
AIJPContextKey aijp_context_key;
bool                           aijp_warmup_done = false;

/* Persists what online refinement learned (merged into the per-GPU cache file with what other processes
   wrote); a cache that cannot be written costs the learning, never the run. */
PetscErrorCode AIJPSaveOnline(void)
{
  PetscFunctionBegin;
  if (!aijp_context || !aijp_context->online_corrections()) PetscFunctionReturn(PETSC_SUCCESS);
  try {
    const std::filesystem::path f = aijp_context->save_online();
    if (!f.empty()) PetscCall(PetscInfo(nullptr, "aijpredict: online corrections saved to %s\n", f.c_str()));
  } catch (const std::exception &e) {
    PetscCall(PetscInfo(nullptr, "aijpredict: online corrections not saved: %s\n", e.what()));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Set while the ranks of an MPI matrix that need a context make it together (AIJPCollectiveContext): the
   context's cache reader then reads once per file and broadcasts. */
MPI_Comm    aijp_bcast_comm   = MPI_COMM_NULL;
bool        aijp_bcast_leader = true; /* this rank read the file for its group (or read alone) */
std::string aijp_bcast_note;          /* what the collective read did, for PetscInfo */

/* FNV-1a: the same on every rank (std::hash need not be). */
unsigned long long AIJPHash(const std::string &s)
{
  unsigned long long h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

void AIJPCheckMPI(int err, const char *what)
{
  if (err == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int  len = 0;
  MPI_Error_string(err, text, &len);
  throw std::runtime_error(std::string("aijpredict: ") + what + " failed while reading the cache collectively: " + std::string(text, static_cast<size_t>(len)));
}

/* The cache reader of a collective context creation (aijp::context_options::read_cache), called once on every
   rank of `comm`. The file name holds the device fingerprint, so ranks with the same name share one file:
   they form a group whose first rank reads it and broadcasts the bytes (status, contents, reason), which
   every rank then checks exactly as a file it read itself. Ranks with other GPUs form their own groups. */
aijp::cache::file_bytes AIJPBroadcastRead(MPI_Comm comm, const std::filesystem::path &path)
{
  const std::string name  = path.string();
  const int         color = static_cast<int>(AIJPHash(name) & 0x7fffffffu);
  int               rank = 0, size = 0;
  MPI_Comm          group = MPI_COMM_NULL;
  AIJPCheckMPI(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  AIJPCheckMPI(MPI_Comm_split(comm, color, rank, &group), "MPI_Comm_split");
  struct group_guard {
    MPI_Comm *c;
    ~group_guard()
    {
      if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
    }
  } guard{&group};
  AIJPCheckMPI(MPI_Comm_rank(group, &rank), "MPI_Comm_rank");
  AIJPCheckMPI(MPI_Comm_size(group, &size), "MPI_Comm_size");
  /* The leader's name, so that two names of equal hash never share bytes: then every rank reads its own. */
  long long len = static_cast<long long>(name.size());
  AIJPCheckMPI(MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, group), "MPI_Bcast");
  std::string leader_name = rank == 0 ? name : std::string(static_cast<size_t>(len), '\0');
  if (len > 0) AIJPCheckMPI(MPI_Bcast(leader_name.data(), static_cast<int>(len), MPI_CHAR, 0, group), "MPI_Bcast");
  int same = leader_name == name, all_same = 0;
  AIJPCheckMPI(MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, group), "MPI_Allreduce");
  if (!all_same) {
    aijp_bcast_leader = true;
    aijp_bcast_note   = "cache file " + name + " read by each process (another file name hashed alike)";
    return aijp::cache::read_file_bytes(path);
  }
  aijp::cache::file_bytes bytes;
  if (rank == 0) bytes = aijp::cache::read_file_bytes(path);
  long long head[3] = {static_cast<long long>(bytes.status), static_cast<long long>(bytes.text.size()), static_cast<long long>(bytes.problem.size())};
  AIJPCheckMPI(MPI_Bcast(head, 3, MPI_LONG_LONG, 0, group), "MPI_Bcast");
  if (rank != 0) {
    bytes.status = static_cast<aijp::cache::load_status>(head[0]);
    bytes.text.assign(static_cast<size_t>(head[1]), '\0');
    bytes.problem.assign(static_cast<size_t>(head[2]), '\0');
  }
  /* read_file_bytes refuses files beyond 64 MiB, so one int count suffices. */
  if (head[1] > 0) AIJPCheckMPI(MPI_Bcast(bytes.text.data(), static_cast<int>(head[1]), MPI_CHAR, 0, group), "MPI_Bcast");
  if (head[2] > 0) AIJPCheckMPI(MPI_Bcast(bytes.problem.data(), static_cast<int>(head[2]), MPI_CHAR, 0, group), "MPI_Bcast");
  aijp_bcast_leader = rank == 0;
  const std::string what = bytes.status == aijp::cache::load_status::ok ? std::to_string(bytes.text.size()) + " bytes" : std::string(aijp::cache::to_string(bytes.status));
  aijp_bcast_note        = "cache file " + name + " read by one process and broadcast (" + what + ") to the " + std::to_string(size) + " processes that share it";
  return bytes;
}

/* Whether the context was made for these options: one context per (cache directory, model, online refinement,
   preload), compared in place, since a step's start asks (building the key as a string cost allocations in the
   product that starts it). */
bool AIJPContextMadeFor(const AIJPOptions &o)
{
  const AIJPContextKey &k = aijp_context_key;
  return aijp_context && k.online == (bool)o.online && k.preload == (bool)o.preload && k.launch_gap == (bool)o.launch_gap && k.model == o.model &&
         k.cache_dir == o.cache_dir;
}

/* The context of (cache directory, model); with -mat_aijpredict_warmup, runs the quick warm-up once per
   process when this GPU has no fitted coefficients yet. Inside AIJPCollectiveContext the cache file is read
   once per group of ranks that share it and broadcast. */
PetscErrorCode AIJPGetContext(const Mat_SeqAIJPredict *p, aijp::context **ctx)
{
  PetscFunctionBegin;
  if (!AIJPContextMadeFor(p->opt)) {
    aijp::context_options opts;
    opts.cache_dir = p->opt.cache_dir;
    opts.model     = p->opt.model;
    opts.online    = p->opt.online;
    opts.preload   = !p->opt.preload ? aijp::kernel_preload::none : sizeof(PetscScalar) == sizeof(float) ? aijp::kernel_preload::float_values : aijp::kernel_preload::double_values;
    opts.measure_launch_gap = p->opt.launch_gap;
    if (aijp_bcast_comm != MPI_COMM_NULL) {
      const MPI_Comm comm = aijp_bcast_comm;
      opts.read_cache     = [comm](const std::filesystem::path &f) { return AIJPBroadcastRead(comm, f); };
    }
    aijp_bcast_leader = true;
    aijp_bcast_note.clear();
    if (aijp_context) PetscCall(AIJPSaveOnline()); /* corrections learned under the previous options */
    const auto t0 = std::chrono::steady_clock::now();
    PetscCallCXX(aijp_context = std::make_shared<aijp::context>(opts));
    aijp_context_key = {p->opt.cache_dir, p->opt.model, (bool)p->opt.online, (bool)p->opt.preload, (bool)p->opt.launch_gap};
    if (p->opt.launch_gap) {
      const aijp::bandwidth_model_params &mp = aijp_context->model_params();
      if (mp.launch_gap_us > 0 && aijp_context->launch_gap_now() > 0)
        PetscCall(PetscInfo(nullptr, "aijpredict: gap between back-to-back kernels %.3f us, the warm-up's %.3f us: predictions moved by %+.3f us per kernel\n", aijp_context->launch_gap_now(), mp.launch_gap_us, mp.launch_shift_us));
      else PetscCall(PetscInfo(nullptr, "aijpredict: -mat_aijpredict_launch_gap: the cache records no warm-up gap (or it could not be measured): predictions not moved\n"));
    }
    PetscCall(PetscInfo(nullptr, "aijpredict: per-process context (device %d, %s %s; cache %s) made in %.3f ms\n", aijp_context->device().ordinal, aijp_context->device().name.c_str(), aijp_context->device().uuid.c_str(),
                        opts.cache_dir.empty() ? "default directory" : opts.cache_dir.c_str(), std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()));
    if (p->opt.preload) {
      const aijp::kernel_preload_report &pr = aijp_context->preload();
      PetscCall(PetscInfo(nullptr, "aijpredict: %d CUDA modules with %d functions preloaded (%d not loaded before) in %.3f ms, %ld pages of host code mapped in %.3f ms%s%s\n", pr.modules, pr.functions, pr.loaded_now, pr.ms, pr.code_pages, pr.code_ms, pr.note.empty() ? "" : "; ", pr.note.c_str()));
    }
    if (!aijp_bcast_note.empty()) PetscCall(PetscInfo(nullptr, "aijpredict: %s\n", aijp_bcast_note.c_str()));
    /* The ranks that received the bytes would repeat their reader's warnings about the file word for word. */
    if (aijp_bcast_leader)
      for (const auto &w : aijp_context->warnings()) PetscCall(PetscPrintf(PETSC_COMM_SELF, "WARNING: %s\n", w.c_str()));
    if (p->opt.warmup && p->opt.model == "placeholder") PetscCall(PetscInfo(nullptr, "aijpredict: -mat_aijpredict_warmup has no effect with -mat_aijpredict_model placeholder\n"));
    if (p->opt.warmup && !aijp_warmup_done && p->opt.model != "placeholder" && aijp_context->model_source().find("fitted on this GPU") == std::string::npos) {
      aijp::warmup_options wo;
      wo.cache_dir = p->opt.cache_dir;
      wo.progress  = [](size_t done, size_t total, double s, const std::string &what) { (void)PetscInfo(nullptr, "aijpredict warm-up %zu/%zu (%.1f s): %s\n", done, total, s, what.c_str()); };
      PetscCall(PetscPrintf(PETSC_COMM_SELF, "aijpredict: -mat_aijpredict_warmup: fitting the models on this GPU (quick grid, about 30 s)...\n"));
      aijp::warmup_result r;
      PetscCallCXX(r = aijp::run_warmup(*aijp_context, wo));
      PetscCall(PetscPrintf(PETSC_COMM_SELF, "aijpredict: warm-up done in %.1f s (%zu samples), coefficients in %s\n", r.seconds, r.samples, r.cache_file.c_str()));
      aijp_warmup_done = true;
      opts.read_cache = nullptr; /* not every rank of the group warms up: read the new file alone */
      PetscCallCXX(aijp_context = std::make_shared<aijp::context>(opts));
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

/* Decides, once per matrix, that its products run on the CPU: SeqAIJ's own, or with -mat_aijpredict_host_copy
   a host copy refreshed like the device copy would be. Says so once (PetscInfo; printed with -mat_aijpredict_view). */
PetscErrorCode AIJPFallBack(Mat A, Mat_SeqAIJPredict *p, const std::string &why, bool host_copy_ok = true)
{
  PetscFunctionBegin;
  const bool host_copy = host_copy_ok && p->opt.host_copy;
  p->mode              = host_copy ? AIJPMode::host_copy : AIJPMode::cpu;
  p->cpu_reason        = why;
  const char *where    = host_copy ? "products use a host copy refreshed like the device copy (-mat_aijpredict_host_copy)" : "MatMult runs on the CPU (SeqAIJ)";
  /* Once per process and reason: GAMG hierarchies and MPI blocks make many matrices. */
  if (aijp_fallbacks_said.insert(why + where).second) PetscCall(PetscInfo(A, "aijpredict: %s; %s\n", why.c_str(), where));
  if (p->opt.view && !p->reported) {
    PetscCall(PetscPrintf(PETSC_COMM_SELF, "aijpredict: %s; %s\n", why.c_str(), where));
    p->reported = true;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
PetscErrorCode AIJPReport(Mat A, Mat_SeqAIJPredict *p)
{
  PetscBool info = PETSC_FALSE;

  PetscFunctionBegin;
  /* Formatting the report takes ~0.15 ms of host time (H100 machine): inside a product, only when someone
     reads it now. Queries and views (AIJPRefreshReport) format it again anyway. */
  PetscCall(PetscInfoEnabled(((PetscObject)A)->classid, &info));
  if (!info && !p->opt.view) {
    p->report.clear();
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCallCXX(p->report = p->gpu->report().to_string());
  PetscCall(PetscInfo(A, "%s", p->report.c_str()));
  if (p->opt.view) PetscCall(PetscPrintf(PETSC_COMM_SELF, "%s", p->report.c_str()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode AIJPInstallStep(Mat, Mat_SeqAIJPredict *, bool);

/* The report with what online refinement measured since the analysis (harvests the timing events: waits for
   the products already issued, so only for views and queries, never on the product path). */
PetscErrorCode AIJPRefreshReport(Mat A, Mat_SeqAIJPredict *p)
{
  PetscFunctionBegin;
  PetscCall(AIJPInstallStep(A, p, true)); /* a background step still running: what it decides */
  if (p->mode != AIJPMode::gpu || !p->gpu || !p->gpu->report().analyzed) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCallCXX(p->gpu->online_sync());
  PetscCallCXX(p->report = p->gpu->report().to_string());
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* What an analysis and a first conversion cost on a small matrix, in microseconds of host time: statistics,
   locality samples, prediction, and the first launch of each kernel involved (H100, 4884 x 4884 bcsstk16:
   analysis 1.18 ms, conversion to csr_vector 1.10 ms; bench/results/2026-11-23_h100_e2e_small_2.txt). */
#define AIJP_ANALYSIS_COST_US 2000.0
#define AIJP_TRACE_MAX        65536 /* -mat_aijpredict_trace_buffer: lines kept per matrix (then counted only) */


/* The CPUs this process may run on (its affinity mask when first asked; the hardware's count where that is
   unknown). */
int AIJPCpusAvailable()
{
  static const int cpus = [] {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
#endif
    return (int)std::max(1u, std::thread::hardware_concurrency());
  }();
  return cpus;
}

/* A staged step's stages without CUDA calls run on the step worker: -mat_aijpredict_host_worker, and a second CPU
   (on one CPU the worker would take the products'). */
bool AIJPStepWorker(PetscBool host_worker)
{
  return host_worker && AIJPCpusAvailable() >= 2;
}

/* -mat_aijpredict_stage_duty's default. With the step worker on a second CPU the products' thread runs only the
   hand-over and the conversion's parts: 1 %. On one CPU every part of the analysis lands in a solve, and a
   solve that holds parts pays for them beyond their measured host time (the caches they evict): at 1 % the
   solves of the step ran 1.016-1.037x aijcusparse's (worst 1.032-1.037x, its noise floor 1.010-1.014x), at
   0.25 % the worst was 1.019-1.022x, with the conversion ~50 solves later (H200, one CPU, 71 rounds of 160
   GMRES(10) solves, bench/results/2026-11-28_h200_session35_short_solves_one_cpu.txt). */
PetscReal AIJPDefaultStageDuty(PetscBool host_worker)
{
  return AIJPStepWorker(host_worker) ? 0.01 : 0.0025;
}

/* -mat_aijpredict_first_solve_analysis applies, and the passes prefetched at the upload are read back. */
bool AIJPFirstSolveAnalysis(const Mat_SeqAIJPredict *p)
{
  return p->opt.first_solve && p->opt.staged && p->opt.prefetch && !p->opt.background && AIJPStepWorker(p->opt.host_worker) && p->gpu->prefetch_ready();
}

/* The plan options every analysis and re-plan of this matrix uses, for `expected` products. */
PetscErrorCode AIJPPlanOptions(const Mat_SeqAIJPredict *p, double expected, aijp::plan_options *opts)
{
  PetscFunctionBegin;
  PetscCallCXX(opts->candidates = p->opt.candidates);
  opts->expected_mults = expected;
  opts->online         = p->opt.online;
  opts->partition      = p->opt.partition;
  opts->stage_fraction = p->opt.stage_fraction;
  opts->stage_duty     = p->opt.stage_duty;
  opts->stage_overlap  = p->opt.stage_overlap;
  opts->host_worker    = AIJPStepWorker(p->opt.host_worker);
  opts->layout_reserve = p->opt.reserve;
  opts->upload_pool    = p->opt.upload_pool;
  opts->online_policy.free_band = p->opt.free_band;
  opts->online_policy.sample_every_max = (int)p->opt.sample_max;
  opts->online_policy.sample_first_spacing = (int)p->opt.first_spacing;
  PetscBool info = PETSC_FALSE;
  PetscCall(PetscInfoEnabled(MAT_CLASSID, &info));
  opts->stage_diagnostics = info; /* the parts' page faults and preemptions, in the -info lines */
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Runs one step of the analysis of a reused matrix: on a worker thread with -mat_aijpredict_background, else
   staged over the next products (-mat_aijpredict_staged, the default), else here. While a staged or threaded
   step runs, the products run the current plan; AIJPInstallStep, after each product, advances it and installs
   the new plan.
   *started: the step runs beside the products; *changed: the plan changed now (synchronous steps only). */
PetscErrorCode AIJPStep(Mat A, Mat_SeqAIJPredict *p, aijp::background_step step, const aijp::plan_options &opts, cudaStream_t stream, bool *started, bool *changed)
{
  aijp::context *ctx = nullptr;

  PetscFunctionBegin;
  *started = false;
  *changed = false;
  PetscCall(AIJPGetContext(p, &ctx));
  PetscCall(PetscLogEventBegin(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
  /* A process bound to one CPU (an MPI rank per core) would share it with the worker thread: both wait for
     their GPU work by spinning, so the products would lose the CPU for whole time slices. */
  const int cpus = AIJPCpusAvailable();
  if (p->opt.background && cpus < 2 && !p->background_said) {
    PetscCall(PetscInfo(A, "aijpredict: this process may run on one CPU only: the analysis runs on the products' thread, %s (-mat_aijpredict_background needs a second CPU)\n", p->opt.staged ? "staged over the products" : "inside the product that decides it"));
    p->background_said = PETSC_TRUE;
  }
  const bool thread = p->opt.background && cpus >= 2;
  if (thread || p->opt.staged) {
    const auto mode = thread ? aijp::background_mode::thread : aijp::background_mode::staged;
    const auto t0 = std::chrono::steady_clock::now();
    PetscCallCXX(*started = p->gpu->start_background(aijp_context, step, opts, stream, mode));
    if (*started) {
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      p->start_us     = us;
      p->step_begun   = p->mults;
      PetscCall(PetscInfo(A, "aijpredict: %s started %s at product %" PetscInt_FMT " (%.0f us)\n", aijp::background_step_name(step), thread ? "in the background" : "staged over the next products", p->mults, us));
    }
  } else {
    switch (step) {
    case aijp::background_step::analyze:
      PetscCallCXX(p->gpu->analyze(*ctx, opts, stream));
      *changed = true;
      break;
    case aijp::background_step::convert_deferred:
      PetscCallCXX(*changed = p->gpu->convert_deferred(opts.expected_mults, stream));
      break;
    case aijp::background_step::plan_when_reused:
      PetscCallCXX(*changed = p->gpu->plan_when_reused(*ctx, opts, stream));
      break;
    }
  }
  PetscCall(PetscLogEventEnd(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
  if (*changed) PetscCall(AIJPReport(A, p));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Installs a finished background step (poll: no wait) or, with wait, waits for it first. */
PetscErrorCode AIJPInstallStep(Mat A, Mat_SeqAIJPredict *p, bool wait)
{
  cudaStream_t stream;
  bool         installed = false, changed = false;

  PetscFunctionBegin;
  if (p->mode != AIJPMode::gpu || !p->gpu) PetscFunctionReturn(PETSC_SUCCESS);
  if (!wait && p->gpu->prefetch_pending()) { /* the passes issued at the upload: read back without waiting */
    PetscCall(PetscGetCurrentCUDAStream(&stream));
    PetscCall(PetscLogEventBegin(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
    bool back = false;
    PetscCallCXX(back = p->gpu->advance_prefetch(stream));
    /* Once, in the product that reads them back: -mat_aijpredict_host_bound_start. */
    if (p->opt.host_bound && back) {
      aijp::context     *ctx = nullptr;
      aijp::plan_options opts;
      bool               switched = false;
      PetscCall(AIJPGetContext(p, &ctx));
      opts.candidates          = p->opt.candidates;
      opts.host_bound_start_us = p->opt.host_bound_us;
      PetscCallCXX(switched = p->gpu->host_bound_start(*ctx, opts, stream));
      if (switched) PetscCall(PetscInfo(A, "aijpredict: product %" PetscInt_FMT ": %s\n", p->mults, p->gpu->report().decision.c_str()));
    }
    PetscCall(PetscLogEventEnd(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
  }
  if (!p->gpu->background_running()) PetscFunctionReturn(PETSC_SUCCESS);
  /* Most products of a step have no part due (the pacing, -mat_aijpredict_stage_duty): that is known from the
     clock alone, so they return before the stream query and the log events. */
  if (!wait && !p->gpu->background_poll_due()) PetscFunctionReturn(PETSC_SUCCESS);
  /* -mat_aijpredict_trace_buffer splits this call's host time: where a part's cost lands outside the part. */
  using clock      = std::chrono::steady_clock;
  const bool split = p->opt.trace_buffer;
  clock::time_point s[5];
  if (split) s[0] = clock::now();
  PetscCall(PetscGetCurrentCUDAStream(&stream));
  if (split) s[1] = clock::now();
  /* A staged step issues its next part here: logged as analysis. */
  PetscCall(PetscLogEventBegin(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
  if (split) s[2] = clock::now();
  if (wait) PetscCallCXX(installed = p->gpu->finish_background(stream, &changed));
  else PetscCallCXX(installed = p->gpu->poll_background(stream, &changed));
  if (split) s[3] = clock::now();
  PetscCall(PetscLogEventEnd(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
  if (split) {
    s[4] = clock::now();
    for (int k = 0; k < 4; ++k) p->install_split_us[k] = std::chrono::duration<double, std::micro>(s[k + 1] - s[k]).count();
  }
  if (!installed) PetscFunctionReturn(PETSC_SUCCESS);
  const auto &r = p->gpu->report();
  /* The lines below format every part's host time: inside a product, only when -info prints them. */
  PetscBool info = PETSC_FALSE;
  PetscCall(PetscInfoEnabled(((PetscObject)A)->classid, &info));
  if (info && r.staged_polls() > 0) {
    PetscCall(PetscInfo(A, "aijpredict: staged step done in %d parts over %d products (%.3f ms of host time in them, at most %.3f ms in one; %.3f ms of device time read back; %.3f ms from start to end), installed in %.3f ms (started at product %" PetscInt_FMT ", installed before product %" PetscInt_FMT "%s): %s\n", r.staged_polls(), r.staged_polls() + r.staged_skipped, r.staged_host_ms(), r.staged_max_poll_ms(), 1e-3 * r.staged_device_us, r.background_ms, r.install_ms, p->step_begun, p->mults, wait ? ", finished at once" : "", changed ? "new plan installed" : "the plan stays"));
    std::string                    us;
    const std::vector<std::string> labels = r.staged_poll_labels();
    for (std::size_t k = 0; k < r.staged_poll_us.size(); ++k) {
      us += " " + std::to_string((int)std::lround(r.staged_poll_us[k]));
      if (k < r.staged_poll_product.size()) us += "@" + std::to_string(r.staged_poll_product[k]);
      if (k < labels.size() && (k == 0 || labels[k] != labels[k - 1])) us += " (" + labels[k] + ")";
    }
    if (r.staged_prefetched || !r.staged_worker_stages.empty()) PetscCall(PetscInfo(A, "aijpredict: staged step: %s%s%s%.3f ms on the step worker (CPU %d)\n", r.staged_prefetched ? "decided from the passes read back after the upload; " : "", r.staged_worker_stages.empty() ? "no stage on the worker: " : "stages on the worker (", r.staged_worker_stages.empty() ? "" : (r.staged_worker_stages + "): ").c_str(), r.staged_worker_ms, r.background_worker_cpu));
    PetscCall(PetscInfo(A, "aijpredict: staged step, host time of each part (us) @ the product after the start it ran in, with its stage where it changes:%s\n", us.c_str()));
  } else if (info) PetscCall(PetscInfo(A, "aijpredict: background step done in %.3f ms on CPU %d (the products' thread on CPU %d when it started), installed in %.3f ms (started at product %" PetscInt_FMT ", installed before product %" PetscInt_FMT "%s): %s\n", r.background_ms, r.background_worker_cpu, r.background_caller_cpu, r.install_ms, p->step_begun, p->mults, wait ? ", waited for" : "", changed ? "new plan installed" : "the plan stays"));
  if (changed) PetscCall(AIJPReport(A, p));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* A staged step just started: the host time this product spent on it outside start_background (the checks,
   the options, the context; 10-15 us of a bcsstk13 product on the H100 machine) counts against the step's
   pacing too, so that its first part comes in a later solve. */
PetscErrorCode AIJPChargeStart(Mat_SeqAIJPredict *p, bool started, std::chrono::steady_clock::time_point checked)
{
  PetscFunctionBegin;
  if (started && p->gpu->background_running()) {
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - checked).count();
    PetscCallCXX(p->gpu->charge_background(std::max(0.0, us - p->start_us)));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Called before each product: after defer_mults products the matrix has proved reused, so analyse it once
   the most it could save over the expected products pays for the analysis; a
   format whose conversion does not pay yet, or a row partition whose planning did not, is reconsidered
   whenever the product count doubles, expecting as many products again as so far (or
   -mat_aijpredict_expected_mults, if larger). Staged (the default) or with -mat_aijpredict_background, a step
   runs over the next products or on a worker thread: this function then only starts it, and AIJPInstallStep
   advances and installs it after each product. */
PetscErrorCode AIJPReuseStep(Mat A, Mat_SeqAIJPredict *p)
{
  cudaStream_t stream;
  bool         started = false, changed = false;

  PetscFunctionBegin;
  p->mults++;
  if (p->gpu->background_running()) PetscFunctionReturn(PETSC_SUCCESS); /* advanced after the product: AIJPInstallStep */
  const auto &rep = p->gpu->report();
  if (rep.analyzed && !rep.deferred && !rep.partition_pending) PetscFunctionReturn(PETSC_SUCCESS);
  if (!rep.analyzed && AIJPFirstSolveAnalysis(p)) {
    /* The passes issued at the upload are back, and the decision runs on the step worker: the products pay the
       start and one hand-over, in the upload's solve, rather than an analysis worth ~2 ms spread over later
       ones. The conversion is amortized over a solve's products at least (defer_mults). */
    const double expected = std::max<double>({p->opt.expected_mults, (double)p->mults, (double)p->opt.defer_mults});
    aijp::plan_options opts;
    PetscCall(PetscGetCurrentCUDAStream(&stream));
    PetscCall(AIJPPlanOptions(p, expected, &opts));
    opts.first_part_unpaced = true;
    opts.convert_at_once_us = p->opt.first_convert;
    opts.worker_converts    = p->opt.worker_convert;
    opts.online_policy.first_samples_wait_for_pace = true; /* installed about the 4th product: pace not known yet */
    p->next_check           = 2 * std::max(p->mults, p->opt.defer_mults);
    PetscCall(AIJPStep(A, p, aijp::background_step::analyze, opts, stream, &started, &changed)); /* its start is not charged */
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (!rep.analyzed && p->mults <= p->opt.defer_mults) PetscFunctionReturn(PETSC_SUCCESS);
  if (p->mults < p->next_check) PetscFunctionReturn(PETSC_SUCCESS);
  const auto checked = std::chrono::steady_clock::now(); /* a check: at most once per doubling of the count */
  PetscCall(PetscGetCurrentCUDAStream(&stream));
  const double expected = std::max<double>(p->opt.expected_mults, p->mults);
  p->next_check         = 2 * p->mults;
  if (!rep.analyzed) {
    /* The analysis is amortized too: no format saves more per product than cuSPARSE CSR's predicted time
       above one kernel launch (predicted at the upload: made here, it cost this product ~8-10 us of host time
       on the H100 machine), so until that bound over the expected products reaches the analysis and
       conversion cost, the matrix stays on cuSPARSE CSR (checked again when the count doubles). */
    const double bound = p->gpu->cusparse_csr_bound_us() * expected;
    if (bound < AIJP_ANALYSIS_COST_US) {
      if (!p->analysis_waits) PetscCall(PetscInfo(A, "aijpredict: analysis waits: a format saves at most %.1f us per product over %.0f products, the analysis costs ~%.0f us\n", bound / expected, expected, AIJP_ANALYSIS_COST_US));
      p->analysis_waits = PETSC_TRUE;
      PetscFunctionReturn(PETSC_SUCCESS);
    }
  }
  aijp::plan_options opts; /* after the check above: a check that waits pays only for it */
  PetscCall(AIJPPlanOptions(p, expected, &opts));
  if (!rep.analyzed) {
    PetscCall(AIJPStep(A, p, aijp::background_step::analyze, opts, stream, &started, &changed));
    PetscCall(AIJPChargeStart(p, started, checked));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (rep.deferred) {
    PetscCall(AIJPStep(A, p, aijp::background_step::convert_deferred, opts, stream, &started, &changed));
    PetscCall(AIJPChargeStart(p, started, checked));
    if (started) PetscFunctionReturn(PETSC_SUCCESS); /* the partition is reconsidered when the count doubles again */
  }
  /* The analysis skipped planning a row partition that its use so far could not pay for. */
  if (rep.partition_pending) {
    PetscCall(AIJPStep(A, p, aijp::background_step::plan_when_reused, opts, stream, &started, &changed));
    PetscCall(AIJPChargeStart(p, started, checked));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
#endif

/* Decides where the products run, once per matrix. */
PetscErrorCode AIJPDecide(Mat A, Mat_SeqAIJPredict *p)
{
  PetscFunctionBegin;
  if (p->mode != AIJPMode::undecided) PetscFunctionReturn(PETSC_SUCCESS);
#if defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  PetscCall(AIJPFallBack(A, p, "this PETSc build has complex scalars, 64-bit indices or a precision other than single/double"));
#else
  std::string why;
  if (!p->opt.use_gpu) PetscCall(AIJPFallBack(A, p, "-mat_aijpredict_use_gpu false", false));
  else if (!aijp::device_available(&why)) PetscCall(AIJPFallBack(A, p, why));
  else p->mode = AIJPMode::gpu;
#endif
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* -mat_aijpredict_host_copy: refreshes the host copy exactly when the device copy would be refreshed. When the
   states say the copy is current, checks that it really is: a difference means an operation changed the
   matrix without increasing its object (or nonzero) state, and the device copy would now be stale. */
PetscErrorCode AIJPSyncHostCopy(Mat A, Mat_SeqAIJPredict *p, bool current, bool same_pattern)
{
  const PetscInt *ai, *aj;
  PetscScalar    *aa;
  PetscMemType    mtype;
  PetscInt        m;

  PetscFunctionBegin;
  PetscCall(MatGetLocalSize(A, &m, nullptr));
  PetscCall(MatSeqAIJGetCSRAndMemType(A, &ai, &aj, &aa, &mtype));
  const PetscInt nnz         = ai[m];
  const bool     pattern_ok  = (PetscInt)p->hi.size() == m + 1 && (PetscInt)p->hj.size() == nnz && std::equal(ai, ai + m + 1, p->hi.begin()) && std::equal(aj, aj + nnz, p->hj.begin());
  if (current) {
    PetscCheck(pattern_ok, PETSC_COMM_SELF, PETSC_ERR_PLIB, "aijpredict: the nonzero pattern changed without a new object state: the device copy would be stale");
    PetscCheck(std::equal(aa, aa + nnz, p->ha.begin()), PETSC_COMM_SELF, PETSC_ERR_PLIB, "aijpredict: the values changed without a new object state: the device copy would be stale");
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  /* The same events as the device copy, so -log_view (and the tests) see values-only refreshes and re-analyses. */
  if (same_pattern) {
    PetscCheck(pattern_ok, PETSC_COMM_SELF, PETSC_ERR_PLIB, "aijpredict: the nonzero pattern changed without a new nonzero state: a values-only refresh of the device copy would be wrong");
    PetscCall(PetscLogEventBegin(AIJP_EVENT_CONVERT, A, 0, 0, 0));
  } else {
    PetscCall(PetscLogEventBegin(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
    p->hi.assign(ai, ai + m + 1);
    p->hj.assign(aj, aj + nnz);
  }
  p->ha.assign(aa, aa + nnz);
  PetscCall(PetscLogEventEnd(same_pattern ? AIJP_EVENT_CONVERT : AIJP_EVENT_ANALYZE, A, 0, 0, 0));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Brings the device copy up to date: new pattern -> new analysis and conversion; new values -> values only. */
PetscErrorCode MatSeqAIJPredictSync(Mat A, Mat_SeqAIJPredict *p)
{
  PetscObjectState state;

  PetscFunctionBegin;
  PetscCall(AIJPDecide(A, p));
  if (p->mode == AIJPMode::cpu) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscObjectStateGet((PetscObject)A, &state));
  const bool current      = p->have_copy && p->state == state && p->nonzerostate == A->nonzerostate;
  const bool same_pattern = p->have_copy && p->nonzerostate == A->nonzerostate;
  if (p->mode == AIJPMode::host_copy) {
    PetscCall(AIJPSyncHostCopy(A, p, current, same_pattern));
    p->have_copy    = true;
    p->state        = state;
    p->nonzerostate = A->nonzerostate;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  if (current) PetscFunctionReturn(PETSC_SUCCESS); /* the hot path */

  const PetscInt *ai, *aj;
  PetscScalar    *aa;
  PetscMemType    mtype;
  PetscInt        m, n;
  PetscCall(MatGetLocalSize(A, &m, &n));
  PetscCall(MatSeqAIJGetCSRAndMemType(A, &ai, &aj, &aa, &mtype));
  PetscCheck(PetscMemTypeHost(mtype), PETSC_COMM_SELF, PETSC_ERR_PLIB, "aijpredict expects the SeqAIJ arrays on the host");
  cudaStream_t stream;
  PetscCall(PetscGetCurrentCUDAStream(&stream));

  /* The nonzero count is a cheap guard against a pattern change that did not increase the nonzero state. */
  if (same_pattern && p->gpu && (PetscInt)p->gpu->nnz() == ai[m] && (PetscInt)p->gpu->rows() == m) {
    PetscCall(PetscLogEventBegin(AIJP_EVENT_CONVERT, A, 0, 0, 0));
    PetscCallCXX(p->gpu->update_values(aa, stream));
    PetscCall(PetscLogCpuToGpu(sizeof(PetscScalar) * ai[m]));
    PetscCall(PetscLogEventEnd(AIJP_EVENT_CONVERT, A, 0, 0, 0));
  } else {
    aijp::context *ctx = nullptr;
    PetscCall(AIJPGetContext(p, &ctx));
    aijp::plan_options opts;
    PetscCall(AIJPPlanOptions(p, p->opt.expected_mults, &opts));
    if (!p->opt.force.empty()) PetscCallCXX(opts.forced = aijp::parse_format(p->opt.force));
    /* Short solves never pay for an analysis: upload and run cuSPARSE CSR until the matrix is reused. */
    opts.analyze = p->opt.defer_mults == 0 || !p->opt.force.empty();
    /* An analysis at the upload knows no use yet (expected_mults 0), and the solve that holds it may be short
       (<= defer_mults products), where everything the analysis adds to the upload counts against it. So its
       partition planning gets a tenth of upload_share of the upload's time, and is planned when the matrix is
       reused if that buys too few strips: unbounded it took 7.2 ms for a 2003-row matrix, 3-4x its first solve
       (H100); at upload_share it took 2.5 ms of a 23 ms upload for lap7 128^3 (42 strips, no split found),
       which with the analysis made an 8-product CG solve 1.08-1.12x aijcusparse's (H200, session 38). */
    opts.planning_upload_share = 0.1 * p->opt.upload_share;
    /* Nor does its online refinement explore (a conversion inside a product) within such a solve: a runner-up
       is tried only after more samples than defer_mults products can hold. */
    opts.online_policy.explore_after = std::max<int>(opts.online_policy.explore_after, (int)std::min<PetscInt>(p->opt.defer_mults + 1, 1 << 20));
    p->mults            = 0;
    p->next_check       = 0;
    p->analysis_waits   = PETSC_FALSE;
    aijp::csr_view<PetscScalar> view{m, n, ai[m], ai, aj, aa};
    p->gpu.reset();
    p->have_copy = false;
    PetscCall(PetscLogEventBegin(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
    try {
      p->gpu = std::make_unique<aijp::gpu_matrix<PetscScalar>>(*ctx, view, opts, stream);
    } catch (const aijp::device_out_of_memory &e) {
      PetscCall(PetscLogEventEnd(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
      PetscCall(AIJPFallBack(A, p, std::string("out of GPU memory (") + e.what() + ")", false));
      PetscFunctionReturn(PETSC_SUCCESS);
    } catch (const aijp::not_supported &e) {
      PetscCall(PetscLogEventEnd(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
      PetscCall(AIJPFallBack(A, p, e.what(), false));
      PetscFunctionReturn(PETSC_SUCCESS);
    } catch (const std::exception &e) {
      SETERRQ(PETSC_COMM_SELF, PETSC_ERR_LIB, "aijpredict: %s", e.what());
    }
    PetscCall(PetscLogCpuToGpu((sizeof(PetscScalar) + sizeof(PetscInt)) * ai[m] + sizeof(PetscInt) * (m + 1)));
    PetscCall(PetscLogEventEnd(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
    {
      const auto &r = p->gpu->report();
      PetscCall(PetscInfo(A, "aijpredict: uploaded %" PetscInt_FMT " x %" PetscInt_FMT " with %" PetscInt_FMT " nonzeros in %.3f ms (free memory %s %.0f us, allocation%s %.0f us, copies and column check %.0f us; then the cuSPARSE CSR layout %.0f us); layout reserve %.1f MiB%s\n", m, n, ai[m], r.upload_ms,
                          r.upload_recent_reading ? "from a recent reading" : "query", r.upload_split_us[0], r.upload_reused ? " from the pool" : "", r.upload_split_us[1], r.upload_split_us[2], r.upload_split_us[3], r.reserve_bytes / 1048576.0,
                          r.reserve_bytes > 0 ? "" : " (none: -mat_aijpredict_reserve 0, a forced format on the CSR copy, or less than half the GPU memory free)"));
    }
    /* A large matrix is analysed (and converted) at its upload, in the first solve, which every GPU matrix type's
       upload dominates, rather than in parts over later solves that would each pay a few percent: when the
       analysis' cost is at most upload_share of the upload's time (20 ms at the default). */
    const double upload_us = 1e3 * p->gpu->report().upload_ms;
    if (!p->gpu->report().analyzed && p->opt.defer_mults > 0 && p->opt.upload_share > 0 && upload_us * p->opt.upload_share >= AIJP_ANALYSIS_COST_US) {
      PetscCall(PetscInfo(A, "aijpredict: analysed at the upload: it took %.1f ms, and an analysis (~%.0f us) is at most %.0f %% of that (-mat_aijpredict_upload_share)\n", 1e-3 * upload_us, AIJP_ANALYSIS_COST_US, 100 * p->opt.upload_share));
      PetscCall(PetscLogEventBegin(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
      PetscCallCXX(p->gpu->analyze(*ctx, opts, stream));
      PetscCall(PetscLogEventEnd(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
    }
    if (p->gpu->report().analyzed) PetscCall(AIJPReport(A, p));
    /* -mat_aijpredict_prefetch: a staged analysis of this matrix decides from the passes issued here and read
       back at the next products; the upload's solve carries them, the later short solves none. With a second CPU
       (-mat_aijpredict_first_solve_analysis) that analysis starts as soon as they are back, in this solve. */
    else if (p->opt.staged && p->opt.prefetch && !p->opt.background && p->opt.defer_mults > 0) {
      PetscCall(PetscLogEventBegin(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
      PetscCallCXX(p->gpu->prefetch_analysis(stream, p->opt.prefetch_side));
      PetscCall(PetscLogEventEnd(AIJP_EVENT_ANALYZE, A, 0, 0, 0));
    }
  }
  p->have_copy    = true;
  p->state        = state;
  p->nonzerostate = A->nonzerostate;
#endif
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* zz = op(A) xx (+ yy) with the host copy (-mat_aijpredict_host_copy). */
PetscErrorCode AIJPApplyHostCopy(Mat A, Mat_SeqAIJPredict *p, Vec xx, Vec yy, Vec zz, bool transpose)
{
  const PetscScalar *x;
  PetscScalar       *z;
  PetscInt           m, n;

  PetscFunctionBegin;
  PetscCall(MatGetLocalSize(A, &m, &n));
  std::vector<PetscScalar> t(transpose ? n : m, 0.0);
  PetscCall(VecGetArrayRead(xx, &x));
  for (PetscInt i = 0; i < m; ++i) {
    for (PetscInt k = p->hi[i]; k < p->hi[i + 1]; ++k) {
      if (transpose) t[p->hj[k]] += p->ha[k] * x[i];
      else t[i] += p->ha[k] * x[p->hj[k]];
    }
  }
  PetscCall(VecRestoreArrayRead(xx, &x));
  if (yy && yy != zz) PetscCall(VecCopy(yy, zz));
  if (yy) {
    PetscCall(VecGetArray(zz, &z));
    for (size_t i = 0; i < t.size(); ++i) z[i] += t[i];
    PetscCall(VecRestoreArray(zz, &z));
  } else {
    PetscCall(VecGetArrayWrite(zz, &z));
    std::copy(t.begin(), t.end(), z);
    PetscCall(VecRestoreArrayWrite(zz, &z));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
/* zz = A xx (+ yy when yy is given); transpose selects A^T. Host vectors are staged through device buffers. */
PetscErrorCode MatSeqAIJPredictApply(Mat A, Mat_SeqAIJPredict *p, Vec xx, Vec yy, Vec zz, bool transpose)
{
  const PetscScalar *x;
  PetscScalar       *z;
  PetscMemType       xm, zm;
  PetscInt           nin = 0, nout = 0;
  cudaStream_t       stream;

  PetscFunctionBegin;
  PetscCall(PetscGetCurrentCUDAStream(&stream));
  if (yy && yy != zz) PetscCall(VecCopy(yy, zz));
  PetscCall(VecGetArrayReadAndMemType(xx, &x, &xm));
  if (yy) PetscCall(VecGetArrayAndMemType(zz, &z, &zm));
  else PetscCall(VecGetArrayWriteAndMemType(zz, &z, &zm));

  const PetscScalar *dx = x;
  PetscScalar       *dz = z;
  if (!PetscMemTypeDevice(xm)) { /* host vectors (the sizes only here: the product's path asks for nothing it does not use) */
    PetscCall(VecGetLocalSize(xx, &nin));
    PetscCall(AIJPStaging(&p->dx, &p->nx, nin));
    PetscCallCUDA(cudaMemcpyAsync(p->dx, x, sizeof(PetscScalar) * nin, cudaMemcpyHostToDevice, stream));
    PetscCall(PetscLogCpuToGpu(sizeof(PetscScalar) * nin));
    dx = p->dx;
  }
  if (!PetscMemTypeDevice(zm)) {
    PetscCall(VecGetLocalSize(zz, &nout));
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
  if (!A->boundtocpu) PetscCall(MatSeqAIJPredictSync(A, p));
  if (A->boundtocpu || p->mode == AIJPMode::cpu) { /* MatBindToCPU(), no GPU, or an unsupported build */
    if (yy) PetscCall((*(transpose ? p->multtransposeadd : p->multadd))(A, xx, yy, zz));
    else PetscCall((*(transpose ? p->multtranspose : p->mult))(A, xx, zz));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (p->mode == AIJPMode::host_copy) {
    PetscCall(AIJPApplyHostCopy(A, p, xx, yy, zz, transpose));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  /* A product normally takes ~10 us of host time; under -info, one that takes more than -mat_aijpredict_trace_ms
     (a quarter of a millisecond) is reported with where its time went (short solves are where such a product shows). The
     clock is read only then: four reads are ~1 % of a small product's host time. */
  using clock  = std::chrono::steady_clock;
  PetscBool trace = p->opt.trace_buffer;
  if (!trace) PetscCall(PetscInfoEnabled(((PetscObject)A)->classid, &trace));
  clock::time_point t[4];
  const auto        stamp = [&](int k) {
    if (trace) t[k] = clock::now();
  };
  stamp(0);
  if (!transpose) PetscCall(AIJPReuseStep(A, p));
  stamp(1);
  PetscCall(PetscLogEventBegin(AIJP_EVENT_SPMV, A, xx, zz, 0));
  PetscCall(MatSeqAIJPredictApply(A, p, xx, yy, zz, transpose));
  PetscCall(PetscLogEventEnd(AIJP_EVENT_SPMV, A, xx, zz, 0));
  stamp(2);
  /* A running staged or threaded step advances (staged: issues its next part on the products' stream) or
     installs its plan after the product is queued rather than before, so that its host time (launches, the
     decision, allocations) overlaps the product's kernels instead of a device left idle by the solver's last
     host wait (dot products, norms). No-op without a step. */
  const bool stepping = trace && p->gpu->background_running();
  if (!transpose) PetscCall(AIJPInstallStep(A, p, false));
  stamp(3);
  if (trace) {
    const auto   part = [&](int a, int b) { return std::chrono::duration<double, std::milli>(t[b] - t[a]).count(); };
    const double ms   = part(0, 3);
    const double gap_us = p->trace_last == clock::time_point{} ? 0.0 : std::chrono::duration<double, std::micro>(t[0] - p->trace_last).count();
    if (ms > p->opt.trace_ms || (p->step_begun == p->mults && part(0, 1) > 0.005)) { /* long, or the product that started a step */
      /* The last part's label only where this product ran one (more than 2 us in the staged column) or printed now:
         formatting it in every traced product of a step would load the products it measures. */
      std::string stage = !p->opt.trace_buffer || part(2, 3) > 0.002 ? p->gpu->staged_last_part() : std::string();
      const auto  note  = [&stage](const std::string &what) { stage += (stage.empty() ? "" : "; ") + what; };
      const auto &r     = p->gpu->report();
      if (r.exploration && !r.exploration->finished) note(std::string("exploring ") + aijp::format_name(r.exploration->to));
      if (p->step_begun == p->mults && p->start_us > 0) note("start_background " + std::to_string((int)std::lround(p->start_us)) + " us");
      if (stepping && part(2, 3) > 0.005) { /* where the staged column's time went */
        char buf[160];
        std::snprintf(buf, sizeof buf, "split: stream %.1f, event %.1f, poll %.1f, event end %.1f us", p->install_split_us[0], p->install_split_us[1], p->install_split_us[2], p->install_split_us[3]);
        note(buf);
      }
      if (stepping && !p->gpu->background_running()) {
        note("installed in " + std::to_string((int)std::lround(1e3 * r.install_ms)) + " us");
        if (r.background_worker_cpu >= 0) stage += " (the worker woke on CPU " + std::to_string(r.background_worker_cpu) + ", the products' thread on CPU " + std::to_string(r.background_caller_cpu) + " when it handed over)";
      }
      if (!p->opt.trace_buffer) PetscCall(PetscInfo(A, "aijpredict: product %" PetscInt_FMT " took %.3f ms of host time (reuse step %.3f, product %.3f, staged step %.3f%s%s)\n", p->mults, ms, part(0, 1), part(1, 2), part(2, 3), stage.empty() ? "" : ": ", stage.c_str()));
      else if (p->trace.size() < AIJP_TRACE_MAX) PetscCallCXX(p->trace.push_back({p->mults, p->step_begun > 0 ? p->mults - p->step_begun : -1, gap_us, 1e3 * part(0, 1), 1e3 * part(1, 2), 1e3 * part(2, 3), stepping, std::move(stage)}));
      else p->trace_dropped++;
    }
    p->trace_last = clock::now(); /* the gap to the next product excludes this bookkeeping */
  }
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
  if (!A->boundtocpu) PetscCall(MatSeqAIJPredictSync(A, p));
  if (A->boundtocpu || p->mode == AIJPMode::cpu) {
    PetscCall((*p->getdiagonal)(A, v));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (p->mode == AIJPMode::host_copy) {
    PetscScalar *d;
    PetscInt     m;
    PetscCall(MatGetLocalSize(A, &m, nullptr));
    PetscCall(VecGetArrayWrite(v, &d));
    for (PetscInt i = 0; i < m; ++i) {
      d[i] = 0.0;
      for (PetscInt k = p->hi[i]; k < p->hi[i + 1]; ++k)
        if (p->hj[k] == i) d[i] = p->ha[k];
    }
    PetscCall(VecRestoreArrayWrite(v, &d));
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
  p->hi.clear();
  p->hj.clear();
  p->ha.clear();
  p->have_copy = false;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* The functions every MATSEQAIJPREDICT composes; f = nullptr removes them (conversion back, destruction). */
PetscErrorCode AIJPComposeSeq(Mat B, bool add);

/* Vectors from MatCreateVecs live on the GPU when the products do, as with aijcusparse. */
PetscErrorCode AIJPSetDefaultVecType(Mat B, PetscBool use_gpu)
{
  PetscFunctionBegin;
  VecType vt = VECSTANDARD;
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  if (use_gpu && aijp::device_available()) vt = VECCUDA;
#endif
  PetscCall(PetscFree(B->defaultvectype));
  PetscCall(PetscStrallocpy(vt, &B->defaultvectype));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode MatConvert_SeqAIJPredict_SeqAIJ(Mat A, MatType, MatReuse reuse, Mat *newmat)
{
  Mat                B = *newmat;
  Mat_SeqAIJPredict *p;

  PetscFunctionBegin;
  if (reuse == MAT_REUSE_MATRIX) { /* *newmat came from an earlier MAT_INITIAL_MATRIX conversion: same pattern */
    PetscCall(MatCopy(A, *newmat, SAME_NONZERO_PATTERN));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (reuse == MAT_INITIAL_MATRIX) PetscCall(MatDuplicate(A, MAT_COPY_VALUES, &B));
  p                        = AIJP(B);
  B->ops->mult             = p->mult;
  B->ops->multadd          = p->multadd;
  B->ops->multtranspose    = p->multtranspose;
  B->ops->multtransposeadd = p->multtransposeadd;
  B->ops->getdiagonal      = p->getdiagonal;
  B->ops->assemblyend      = p->assemblyend;
  B->ops->destroy          = p->destroy;
  B->ops->duplicate        = p->duplicate;
  B->ops->view             = p->view;
  B->ops->setfromoptions   = p->setfromoptions;
  PetscCall(AIJPFreeDeviceData(p));
  delete p;
  B->spptr = nullptr;
  PetscCall(AIJPComposeSeq(B, false));
  PetscCall(PetscFree(B->defaultvectype));
  PetscCall(PetscStrallocpy(VECSTANDARD, &B->defaultvectype));
  B->boundtocpu = PETSC_TRUE; /* as MatCreate() leaves a SeqAIJ matrix */
  PetscCall(PetscObjectChangeTypeName((PetscObject)B, MATSEQAIJ));
  *newmat = B;
  PetscFunctionReturn(PETSC_SUCCESS);
}

#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
/* -mat_aijpredict_trace_buffer: the products kept by MatProduct_SeqAIJPredict, one line each, on stdout (rank's
   own: PETSC_COMM_SELF). Columns: the product's count, products since the step began, host time (us) since the
   previous product returned (the solver's work between them; a solve boundary shows as a long gap), then the
   product's host time split as the -info trace splits it, whether a step was running when the product was queued,
   and the staged step's part run in the product (its label: "-" where none ran). */
PetscErrorCode AIJPPrintTrace(Mat_SeqAIJPredict *p)
{
  PetscFunctionBegin;
  PetscCall(PetscPrintf(PETSC_COMM_SELF, "aijpredict trace: %zu products over %.3f ms of host time (-mat_aijpredict_trace_ms) or starting a step%s; columns: product, since the step began, gap us, reuse us, product us, staged us, total us, step running (1/0), stage\n", p->trace.size(), (double)p->opt.trace_ms,
                        p->trace_dropped ? (", " + std::to_string(p->trace_dropped) + " more not kept").c_str() : ""));
  for (const auto &e : p->trace)
    PetscCall(PetscPrintf(PETSC_COMM_SELF, "aijpredict trace: %" PetscInt_FMT " %" PetscInt_FMT " %.1f %.1f %.1f %.1f %.1f %d %s\n", e.mult, e.since_start, e.gap_us, e.reuse_us, e.apply_us, e.step_us, e.reuse_us + e.apply_us + e.step_us, e.stepping ? 1 : 0, e.stage.empty() ? "-" : e.stage.c_str()));
  p->trace.clear();
  PetscFunctionReturn(PETSC_SUCCESS);
}
#endif

PetscErrorCode MatDestroy_SeqAIJPredict(Mat A)
{
  Mat_SeqAIJPredict *p = AIJP(A);
  PetscErrorCode (*destroy)(Mat);

  PetscFunctionBegin;
  destroy = p ? p->destroy : A->ops->destroy;
  if (p) {
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
    /* -mat_aijpredict_view: what the products measured against the prediction, once the matrix is done (a
       background step still running is waited for, so that the report says what it decided). */
    if (p->opt.view) PetscCall(AIJPInstallStep(A, p, true));
    if (p->opt.view && p->mode == AIJPMode::gpu && p->gpu && p->gpu->report().analyzed) {
      PetscCall(AIJPRefreshReport(A, p));
      PetscCall(PetscPrintf(PETSC_COMM_SELF, "aijpredict: at MatDestroy after %" PetscInt_FMT " products:\n%s", p->mults, p->report.c_str()));
    } else if (p->opt.view && p->mode == AIJPMode::gpu && p->gpu) {
      PetscCall(PetscPrintf(PETSC_COMM_SELF, "aijpredict: %" PetscInt_FMT " x %" PetscInt_FMT " matrix destroyed after %" PetscInt_FMT " products, all on cuSPARSE CSR: not analysed (%s)\n", (PetscInt)p->gpu->rows(), (PetscInt)p->gpu->cols(), p->mults,
                            p->analysis_waits ? "the most a format could save over these products did not pay for an analysis" : "a matrix is analysed after -mat_aijpredict_defer_mults products"));
    }
    if (p->opt.trace_buffer && (!p->trace.empty() || p->trace_dropped)) PetscCall(AIJPPrintTrace(p));
#endif
    PetscCall(AIJPFreeDeviceData(p));
    delete p;
    A->spptr = nullptr;
  }
  PetscCall(AIJPComposeSeq(A, false));
  PetscCall(PetscObjectChangeTypeName((PetscObject)A, MATSEQAIJ));
  PetscCall((*destroy)(A));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* SeqAIJ's duplicate creates the new matrix with MatSetType() (so a new, independent device copy) and copies
   the arrays; the options of this matrix (which may come from its prefix) go with it. */
PetscErrorCode MatDuplicate_SeqAIJPredict(Mat A, MatDuplicateOption op, Mat *M)
{
  Mat_SeqAIJPredict *p = AIJP(A);

  PetscFunctionBegin;
  PetscCall((*p->duplicate)(A, op, M));
  Mat_SeqAIJPredict *q = AIJP(*M);
  PetscCheck(q, PETSC_COMM_SELF, PETSC_ERR_PLIB, "aijpredict: the duplicate is not a MATSEQAIJPREDICT");
  q->opt = p->opt;
  PetscCall(AIJPSetDefaultVecType(*M, q->opt.use_gpu));
  (*M)->boundtocpu = A->boundtocpu;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* One line on where this matrix's products run: the format, or why the CPU. */
PetscErrorCode AIJPDescribe(Mat A, std::string *what)
{
  Mat_SeqAIJPredict *p = AIJP(A);

  PetscFunctionBegin;
  if (A->boundtocpu) {
    *what = "bound to the CPU (MatBindToCPU): products run as SeqAIJ";
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(AIJPDecide(A, p));
  switch (p->mode) {
  case AIJPMode::cpu:
    *what = "products on the CPU (SeqAIJ): " + p->cpu_reason;
    break;
  case AIJPMode::host_copy:
    *what = "products with a host copy (-mat_aijpredict_host_copy): " + p->cpu_reason;
    break;
  default:
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
    if (!p->gpu) *what = "GPU copy not built yet (at the first product)";
    else *what = std::string("SpMV format ") + aijp::format_name(p->gpu->format()) + (p->gpu->report().analyzed ? "" : " (not analysed yet: -mat_aijpredict_defer_mults)");
#endif
    break;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* -mat_view ::ascii_info[_detail]: SeqAIJ's text, then where the products run (and, in detail, the report). */
PetscErrorCode MatView_SeqAIJPredict(Mat A, PetscViewer viewer)
{
  Mat_SeqAIJPredict *p = AIJP(A);
  PetscBool          isascii;
  PetscViewerFormat  format;

  PetscFunctionBegin;
  PetscCall((*p->view)(A, viewer));
  PetscCall(PetscObjectTypeCompare((PetscObject)viewer, PETSCVIEWERASCII, &isascii));
  if (!isascii) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscViewerGetFormat(viewer, &format));
  if (format != PETSC_VIEWER_ASCII_INFO && format != PETSC_VIEWER_ASCII_INFO_DETAIL) PetscFunctionReturn(PETSC_SUCCESS);
  std::string what;
  PetscCall(AIJPDescribe(A, &what));
  PetscCall(PetscViewerASCIIPrintf(viewer, "aijpredict: %s\n", what.c_str()));
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  if (format == PETSC_VIEWER_ASCII_INFO_DETAIL) PetscCall(AIJPRefreshReport(A, p));
#endif
  if (format == PETSC_VIEWER_ASCII_INFO_DETAIL && p->mode == AIJPMode::gpu && !p->report.empty()) {
    PetscCall(PetscViewerASCIIPushTab(viewer));
    PetscCall(PetscViewerASCIIPrintf(viewer, "%s", p->report.c_str()));
    PetscCall(PetscViewerASCIIPopTab(viewer));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode MatAIJPredictGetFormat_SeqAIJPredict(Mat A, const char **fmt)
{
  Mat_SeqAIJPredict *p = AIJP(A);

  PetscFunctionBegin;
  *fmt = p->mode == AIJPMode::host_copy && !A->boundtocpu ? "host_copy" : "cpu";
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  if (p->mode == AIJPMode::gpu && p->gpu && !A->boundtocpu) *fmt = aijp::format_name(p->gpu->format());
#endif
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode MatAIJPredictGetReport_SeqAIJPredict(Mat A, const char **report)
{
  Mat_SeqAIJPredict *p = AIJP(A);

  PetscFunctionBegin;
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  PetscCall(AIJPRefreshReport(A, p));
#endif
  *report = p->mode == AIJPMode::gpu ? (p->report.empty() ? nullptr : p->report.c_str()) : (p->mode == AIJPMode::undecided ? nullptr : p->cpu_reason.c_str());
  PetscFunctionReturn(PETSC_SUCCESS);
}

std::string AIJPFormatHelp()
{
  std::string s;
  for (auto f : aijp::all_formats()) s += std::string(s.empty() ? "" : ", ") + aijp::format_name(f);
  return s;
}

/* The -mat_aijpredict_* options, inside an options block (PetscOptionsBegin() or a type's setfromoptions). */
PetscErrorCode AIJPOptionsParse(PetscOptionItems PetscOptionsObject, MPI_Comm comm, AIJPOptions *o)
{
  char      formats[256], force[64], dir[PETSC_MAX_PATH_LEN], model[64];
  PetscBool set;

  PetscFunctionBegin;
  const std::string names = AIJPFormatHelp();
  PetscCall(PetscOptionsString("-mat_aijpredict_formats", ("Comma-separated candidate storage formats (" + names + "); default: all").c_str(), "MatCreateSeqAIJPredict", o->formats.c_str(), formats, sizeof(formats), &set));
  if (set) o->formats = formats;
  PetscCall(PetscOptionsString("-mat_aijpredict_force", ("Use this storage format without prediction (" + names + ")").c_str(), "MatCreateSeqAIJPredict", o->force.c_str(), force, sizeof(force), &set));
  if (set) o->force = force;
  PetscCall(PetscOptionsString("-mat_aijpredict_cache_dir", "Directory of the per-GPU coefficient cache (default $AIJPREDICT_CACHE_DIR, else $XDG_CACHE_HOME/aijpredict)", "MatCreateSeqAIJPredict", o->cache_dir.c_str(), dir, sizeof(dir), &set));
  if (set) o->cache_dir = dir;
  PetscCall(PetscOptionsString("-mat_aijpredict_model", "Performance model ranking the formats: placeholder (calibrated bandwidth + serial-row model, default), aijp (fitted on this GPU by the warm-up), guo_wang, wang_gu_li_normal, wang_gu_li_uniform", "MatCreateSeqAIJPredict", o->model.c_str(), model, sizeof(model), &set));
  if (set) o->model = model;
  PetscCall(PetscOptionsBool("-mat_aijpredict_warmup", "If this GPU has no fitted coefficients yet, run the quick warm-up (about 30 s) once and store them in the cache", "MatCreateSeqAIJPredict", o->warmup, &o->warmup, nullptr));
  PetscCall(PetscOptionsInt("-mat_aijpredict_defer_mults", "Products run on cuSPARSE CSR before the matrix is analysed (0: analyse at the first product); after them the analysis still waits until the most a format could save over the expected products pays for it", "MatCreateSeqAIJPredict", o->defer_mults, &o->defer_mults, nullptr));
  PetscCheck(o->defer_mults >= 0, comm, PETSC_ERR_ARG_OUTOFRANGE, "-mat_aijpredict_defer_mults must be >= 0, got %" PetscInt_FMT, o->defer_mults);
  PetscCall(PetscOptionsReal("-mat_aijpredict_expected_mults", "Products expected with this matrix: a format is converted to only if its predicted saving times this pays for the conversion (0: as many as so far)", "MatCreateSeqAIJPredict", o->expected_mults, &o->expected_mults, nullptr));
  PetscCheck(o->expected_mults >= 0, comm, PETSC_ERR_ARG_OUTOFRANGE, "-mat_aijpredict_expected_mults must be >= 0");
  PetscCall(PetscOptionsBool("-mat_aijpredict_view", "Print the row statistics, each format's predicted time and the choice, and at MatDestroy the measured time and the model's error", "MatCreateSeqAIJPredict", o->view, &o->view, nullptr));
  PetscCall(PetscOptionsBool("-mat_aijpredict_launch_gap", "When the per-process context is made, time the gap between back-to-back kernels (about 10 ms) and, where the cache recorded its warm-up's, move every prediction by each product's kernels times the difference", "MatCreateSeqAIJPredict", o->launch_gap, &o->launch_gap, nullptr));
  PetscCall(PetscOptionsBool("-mat_aijpredict_preload", "Load the library's CUDA modules of PetscScalar's kernels when the per-process context is made (a few ms once), so that no product pays for loading one (lazy loading: ~0.1-1 ms at the first use of each format)", "MatCreateSeqAIJPredict", o->preload, &o->preload, nullptr));
  PetscCall(PetscOptionsBool("-mat_aijpredict_online", "Time sampled products with CUDA events (never waiting for them), correct the model's predictions per format with what was measured (saved in the cache at PetscFinalize), and try the runner-up format, then cuSPARSE CSR (its ALG2 when cuSPARSE CSR runs), once each when the chosen one measures slower than the candidate's prediction at two observations in a row; where the formats measured on a matrix show the cached streaming bandwidth is off, rank the formats again at the bandwidth that fits them and try the best one not yet measured once", "MatCreateSeqAIJPredict", o->online, &o->online, nullptr));
  PetscCall(PetscOptionsBool("-mat_aijpredict_partition", "Plan row-partitioned multi-format layouts (dynamic programming over row strips) and use one when its predicted time beats the best single format", "MatCreateSeqAIJPredict", o->partition, &o->partition, nullptr));
  PetscCall(PetscOptionsBool("-mat_aijpredict_prefetch", "With staged steps: issue the analysis' device passes (row statistics, locality samples, then the row-length histogram) in the product that uploads the matrix and read them back without waiting at the next products, so that a staged analysis of a reused matrix starts at its decision and none of its parts issues a device pass; the upload's solve carries them", "MatCreateSeqAIJPredict", o->prefetch, &o->prefetch, nullptr));
  PetscCall(PetscOptionsBool("-mat_aijpredict_host_bound_start", "With -mat_aijpredict_prefetch: once its passes are read back and before any analysis, run csr_vector on the CSR copy instead of cuSPARSE CSR where the model predicts it no slower on the device and cuSPARSE CSR's product at most -mat_aijpredict_host_bound_start_us (no conversion: its launch costs the host ~4-5 us less than a cusparseSpMV call, which is what a host-bound short solve pays for); the analysis later decides as usual", "MatCreateSeqAIJPredict", o->host_bound, &o->host_bound, nullptr));
  PetscCall(PetscOptionsReal("-mat_aijpredict_host_bound_start_us", "With -mat_aijpredict_host_bound_start: switch only where cuSPARSE CSR's product is predicted at most this many microseconds (a longer one keeps the device busy while the host runs ahead, so the host time saved buys nothing, and csr_vector measured up to 15 % slower on products of 25-50 us where predicted faster; 0: never)", "MatCreateSeqAIJPredict", o->host_bound_us, &o->host_bound_us, nullptr));
  PetscCheck(o->host_bound_us >= 0, comm, PETSC_ERR_ARG_OUTOFRANGE, "-mat_aijpredict_host_bound_start_us must be >= 0, got %g", (double)o->host_bound_us);
  PetscCall(PetscOptionsBool("-mat_aijpredict_prefetch_stream", "With -mat_aijpredict_prefetch: issue those passes on a stream of their own (per device and process, lowest priority, after an event of the products' stream), so that the products queued after them in the upload's solve do not wait for their device time", "MatCreateSeqAIJPredict", o->prefetch_side, &o->prefetch_side, nullptr));
  PetscCall(PetscOptionsBool("-mat_aijpredict_host_worker", "With staged steps: run the stages that make no CUDA call (the copy of a plan never analysed, the decision, the partition planner's DP, a conversion to a format on the CSR copy) on the process's step worker thread instead of in parts on the products' thread, which then only hands them over and checks a flag; needs a second CPU (ignored on one)", "MatCreateSeqAIJPredict", o->host_worker, &o->host_worker, nullptr));
  PetscCall(PetscOptionsBool("-mat_aijpredict_first_solve_analysis", "With -mat_aijpredict_prefetch and -mat_aijpredict_host_worker (two CPUs): start the analysis as soon as the passes issued at the upload are read back, with its hand-over to the step worker unpaced, so that the hand-over and the install land in the upload's solve rather than in a later one; a conversion is then made if it pays within the products so far or -mat_aijpredict_defer_mults, whichever is more (a format on the CSR copy costs only its install), or at once if estimated at most -mat_aijpredict_first_solve_convert_us, else reconsidered as the product count doubles; the new plan's first online samples wait for the solver's pace", "MatCreateSeqAIJPredict", o->first_solve, &o->first_solve, nullptr));
  PetscCall(PetscOptionsReal("-mat_aijpredict_first_solve_convert_us", "With -mat_aijpredict_first_solve_analysis: a choice whose conversion is estimated at most this many microseconds is converted at once, in the upload's solve (every GPU matrix type's first solve pays its upload), rather than deferred until it pays, when its parts would cost each later solve they land in 2-6 % (0: amortized as usual)", "MatCreateSeqAIJPredict", o->first_convert, &o->first_convert, nullptr));
  PetscCheck(o->first_convert >= 0, comm, PETSC_ERR_ARG_OUTOFRANGE, "-mat_aijpredict_first_solve_convert_us must be >= 0");
  PetscCall(PetscOptionsBool("-mat_aijpredict_worker_convert", "With -mat_aijpredict_first_solve_analysis: a conversion made at once to sell_delta16, sell_sigma or sell runs on the step worker thread and its own CUDA stream (after an event of the products' stream) instead of in whole parts on the products' thread and stream, which then pay only the hand-over and the install; other formats convert on the products' thread", "MatCreateSeqAIJPredict", o->worker_convert, &o->worker_convert, nullptr));
  PetscCall(PetscOptionsBool("-mat_aijpredict_background", "Analyse and convert a reused matrix on a worker thread, on its own CUDA stream, while the products keep running the current format (cuSPARSE CSR before the first analysis); the new format is installed at the first product after it is ready. Needs a second CPU. Off by default: on one GPU the step's work shares the device with the products, so it spreads the cost over more products rather than removing it (false: inside the product that decides it)", "MatCreateSeqAIJPredict", o->background, &o->background, nullptr));
  PetscCall(PetscOptionsBool("-mat_aijpredict_staged", "Analyse and convert a reused matrix in parts over the next products, on their stream, never waiting for the device (read-backs are polled at later products), paced by -mat_aijpredict_stage_duty; the products run the current format until the new one is complete. A partition is planned in slices and built block by block; a conversion to sell_delta16, sell_sigma or sell is split so each product carries at most -mat_aijpredict_stage_fraction of its time (an exploration's candidate of those formats too, after the products); other formats convert in one part. False: the whole analysis and conversion inside the product that decides it (one solve of repeated short solves took 1.4-2.4x there, against 1.09-1.6x staged on an H100). -mat_aijpredict_background takes precedence", "MatCreateSeqAIJPredict", o->staged, &o->staged, nullptr));
  PetscCall(PetscOptionsReal("-mat_aijpredict_stage_fraction", "Staged steps: the largest share of a conversion one product carries, as a fraction of the running format's predicted product time", "MatCreateSeqAIJPredict", o->stage_fraction, &o->stage_fraction, nullptr));
  PetscCheck(o->stage_fraction > 0, comm, PETSC_ERR_ARG_OUTOFRANGE, "-mat_aijpredict_stage_fraction must be > 0");
  if (!o->stage_duty_set) o->stage_duty = AIJPDefaultStageDuty(o->host_worker);
  PetscCall(PetscOptionsReal("-mat_aijpredict_stage_duty", "Staged steps: the most host time their parts take beyond the product each one overlaps, plus the device time of their passes, as a share of the wall time since the step began, each gap between two products counted at most 3x the median of the recent gaps (the time between solves does not count whole; a product issues the next part only within it; 0: a part at every product). Default 0.01 with -mat_aijpredict_host_worker on a second CPU, else 0.0025 (one CPU: every part lands in a solve)", "MatCreateSeqAIJPredict", o->stage_duty, &o->stage_duty, &set));
  if (set) o->stage_duty_set = PETSC_TRUE;
  PetscCheck(o->stage_duty >= 0 && o->stage_duty <= 1, comm, PETSC_ERR_ARG_OUTOFRANGE, "-mat_aijpredict_stage_duty must be in [0, 1]");
  PetscCall(PetscOptionsReal("-mat_aijpredict_stage_overlap", "Staged steps: the share of the running format's predicted product time a part's host time is taken to overlap (not counted against -mat_aijpredict_stage_duty); 1: the device is busy with the product meanwhile, 0: all of a part's host time counts", "MatCreateSeqAIJPredict", o->stage_overlap, &o->stage_overlap, nullptr));
  PetscCheck(o->stage_overlap >= 0 && o->stage_overlap <= 1, comm, PETSC_ERR_ARG_OUTOFRANGE, "-mat_aijpredict_stage_overlap must be in [0, 1]");
  PetscCall(PetscOptionsReal("-mat_aijpredict_reserve", "Device memory set aside in the CSR copy's allocation for the layouts of later conversions, as a fraction of the copy's bytes counted twice up to 64 MiB (2x the copy for a small matrix, whose reserve also holds an exploration's layout): a conversion inside a short solve then makes no cudaMalloc (~0.1-0.3 ms each) and frees nothing. Only while the GPU keeps half its memory free; held until the matrix is destroyed (0: none)", "MatCreateSeqAIJPredict", o->reserve, &o->reserve, nullptr));
  PetscCheck(o->reserve >= 0 && o->reserve <= 4, comm, PETSC_ERR_ARG_OUTOFRANGE, "-mat_aijpredict_reserve must be in [0, 4]");
  PetscCall(PetscOptionsBool("-mat_aijpredict_upload_pool", "Upload the CSR copy (and its layout reserve) into a block of a process-wide pool that keeps destroyed matrices' blocks for later uploads (a few us instead of a cudaMalloc of ~0.1 ms; at most 256 MiB kept unused, given back when an allocation of ours runs out of memory; copies up to 64 MiB), and take the reserve's free-memory figure from a reading of the last second instead of asking the driver", "MatCreateSeqAIJPredict", o->upload_pool, &o->upload_pool, nullptr));
  PetscCall(PetscOptionsReal("-mat_aijpredict_free_band", "Online refinement: where the running format's products measure at most 20 us, csr_vector or csr_scalar (they run on the CSR copy: no conversion), if never measured on this matrix, is also tried when predicted within this fraction of the measured time, slower predictions included (0: only when predicted faster by the exploration margin)", "MatCreateSeqAIJPredict", o->free_band, &o->free_band, nullptr));
  PetscCheck(o->free_band >= 0 && o->free_band <= 1, comm, PETSC_ERR_ARG_OUTOFRANGE, "-mat_aijpredict_free_band must be in [0, 1]");
  PetscCall(PetscOptionsReal("-mat_aijpredict_upload_share", "A matrix whose analysis (~2 ms) is at most this share of its upload's time is analysed and converted at the upload, in the first solve, instead of over the products after -mat_aijpredict_defer_mults (0: never); an analysis at the upload plans a row partition within a tenth of this share of the upload's time, else when the matrix is reused, and its online refinement tries no other format within -mat_aijpredict_defer_mults products (a short solve holding the upload pays for neither)", "MatCreateSeqAIJPredict", o->upload_share, &o->upload_share, nullptr));
  PetscCheck(o->upload_share >= 0 && o->upload_share <= 1, comm, PETSC_ERR_ARG_OUTOFRANGE, "-mat_aijpredict_upload_share must be in [0, 1]");
  PetscCall(PetscOptionsReal("-mat_aijpredict_trace_ms", "Under -info, report each product whose host time (reuse check, product, staged part) exceeds this many milliseconds, with where it went", "MatCreateSeqAIJPredict", o->trace_ms, &o->trace_ms, nullptr));
  PetscCheck(o->trace_ms >= 0, comm, PETSC_ERR_ARG_OUTOFRANGE, "-mat_aijpredict_trace_ms must be >= 0");
  PetscCall(PetscOptionsBool("-mat_aijpredict_trace_buffer", "Keep the products -mat_aijpredict_trace_ms selects (and each step's start) in memory without -info and print them at MatDestroy: one line per product with the host time since the previous one", "MatCreateSeqAIJPredict", o->trace_buffer, &o->trace_buffer, nullptr));
  PetscCall(PetscOptionsInt("-mat_aijpredict_online_sample_max", "Online refinement: a settled plan times one product in 8, and each observation (8 samples) doubles that interval up to one in this many (a timed product costs ~7 us of host time); 8: no thinning", "MatCreateSeqAIJPredict", o->sample_max, &o->sample_max, nullptr));
  PetscCheck(o->sample_max >= 8 && o->sample_max <= 1000000, comm, PETSC_ERR_ARG_OUTOFRANGE, "-mat_aijpredict_online_sample_max must be in [8, 1000000]");
  PetscCall(PetscOptionsInt("-mat_aijpredict_online_first_spacing", "Online refinement: where the product takes at most 15 % of the host time between products (a host-bound solve: GMRES on a small matrix), a new plan's first 16 samples are every n-th product instead of every one (a timed product costs ~7 us of host time); 1: every product", "MatCreateSeqAIJPredict", o->first_spacing, &o->first_spacing, nullptr));
  PetscCheck(o->first_spacing >= 1 && o->first_spacing <= 1000000, comm, PETSC_ERR_ARG_OUTOFRANGE, "-mat_aijpredict_online_first_spacing must be in [1, 1000000]");
  PetscCall(PetscOptionsBool("-mat_aijpredict_use_gpu", "Run the products on the GPU (false: SeqAIJ on the CPU)", "MatCreateSeqAIJPredict", o->use_gpu, &o->use_gpu, nullptr));
  PetscCall(PetscOptionsBool("-mat_aijpredict_host_copy", "Without a GPU, keep the copy the GPU would hold on the host, refreshed by the same state checks, and multiply with it (tests that no operation leaves a stale copy)", "MatCreateSeqAIJPredict", o->host_copy, &o->host_copy, nullptr));
  /* Reject bad values now, with the option's name, rather than at the first MatMult. */
  try {
    o->candidates = aijp::parse_format_list(o->formats);
    if (!o->force.empty()) (void)aijp::parse_format(o->force);
    if (o->model != "placeholder") (void)aijp::model::make_model(o->model);
  } catch (const std::exception &e) {
    SETERRQ(comm, PETSC_ERR_ARG_OUTOFRANGE, "aijpredict: bad -mat_aijpredict_formats, -mat_aijpredict_force or -mat_aijpredict_model: %s", e.what());
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Reads the options at creation, with the prefix (and communicator) of the matrix, or of the MPI matrix that
   owns this block. */
PetscErrorCode AIJPOptionsRead(MPI_Comm comm, const char prefix[], AIJPOptions *o)
{
  PetscFunctionBegin;
  PetscOptionsBegin(comm, prefix, "AIJPredict options", "Mat");
  PetscCall(AIJPOptionsParse(PetscOptionsObject, comm, o));
  PetscOptionsEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* MatSetFromOptions(): SeqAIJ's options, then ours again (the prefix may have been set after MatSetType()). */
PetscErrorCode MatSetFromOptions_SeqAIJPredict(Mat A, PetscOptionItems PetscOptionsObject)
{
  Mat_SeqAIJPredict *p = AIJP(A);

  PetscFunctionBegin;
  if (p->setfromoptions) PetscCall((*p->setfromoptions)(A, PetscOptionsObject));
  PetscOptionsHeadBegin(PetscOptionsObject, "AIJPredict options");
  PetscCall(AIJPOptionsParse(PetscOptionsObject, PetscObjectComm((PetscObject)A), &p->opt));
  PetscOptionsHeadEnd();
  PetscCall(AIJPSetDefaultVecType(A, p->opt.use_gpu));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Converts B (a SeqAIJ matrix) into a SeqAIJPredict one in place, reading the options with (comm, prefix). */
PetscErrorCode AIJPConvertInPlace(Mat B, MPI_Comm comm, const char prefix[])
{
  Mat_SeqAIJPredict *p;

  PetscFunctionBegin;
  PetscCall(MatAIJPredictInitializePackage());
  p        = new Mat_SeqAIJPredict();
  B->spptr = p;

  p->assemblyend         = B->ops->assemblyend;
  p->destroy             = B->ops->destroy;
  p->duplicate           = B->ops->duplicate;
  p->view                = B->ops->view;
  p->setfromoptions      = B->ops->setfromoptions;
  B->ops->assemblyend    = MatAssemblyEnd_SeqAIJPredict;
  B->ops->destroy        = MatDestroy_SeqAIJPredict;
  B->ops->duplicate      = MatDuplicate_SeqAIJPredict;
  B->ops->view           = MatView_SeqAIJPredict;
  B->ops->setfromoptions = MatSetFromOptions_SeqAIJPredict;
  AIJPInstallOps(B, p);
  B->boundtocpu = PETSC_FALSE; /* MatCreate() binds every matrix to the CPU; device types unbind (aijcusparse does) */

  PetscCall(AIJPOptionsRead(comm, prefix, &p->opt));
  PetscCall(AIJPSetDefaultVecType(B, p->opt.use_gpu));
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  /* The per-process context (device properties, model constants from the cache) is made once, when the type
     is set, as aijcusparse makes its cuSPARSE handle: a short solve's first product should not pay for it. */
  if (p->opt.use_gpu && aijp::device_available()) {
    /* PETSc selects each process's GPU (rank modulo the device count) lazily; the context must be made on that
       device, not on device 0 (aijcusparse initialises the device at conversion too). */
    PetscCall(PetscDeviceInitialize(PETSC_DEVICE_CUDA));
    aijp::context *ctx = nullptr;
    if (!aijp_defer_context) PetscCall(AIJPGetContext(p, &ctx));
  }
#endif
  PetscCall(AIJPComposeSeq(B, true));
  PetscCall(PetscObjectChangeTypeName((PetscObject)B, MATSEQAIJPREDICT));
  PetscFunctionReturn(PETSC_SUCCESS);
}

} // namespace

/* Converts a SeqAIJ matrix into a SeqAIJPredict one (in place, a new matrix, or into an earlier result). */
PETSC_INTERN PetscErrorCode MatConvert_SeqAIJ_SeqAIJPredict(Mat A, MatType type, MatReuse reuse, Mat *newmat)
{
  Mat       B = *newmat;
  PetscBool sametype;

  PetscFunctionBegin;
  if (reuse == MAT_REUSE_MATRIX) { /* *newmat came from an earlier MAT_INITIAL_MATRIX conversion: same pattern */
    PetscCall(MatCopy(A, *newmat, SAME_NONZERO_PATTERN));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (reuse == MAT_INITIAL_MATRIX) PetscCall(MatDuplicate(A, MAT_COPY_VALUES, &B));
  PetscCall(PetscObjectTypeCompare((PetscObject)B, MATSEQAIJPREDICT, &sametype));
  if (!sametype) PetscCall(AIJPConvertInPlace(B, PetscObjectComm((PetscObject)B), ((PetscObject)A)->prefix));
  *newmat = B;
  PetscFunctionReturn(PETSC_SUCCESS);
}

namespace {
PetscErrorCode AIJPComposeSeq(Mat B, bool add)
{
  PetscFunctionBegin;
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatConvert_seqaijpredict_seqaij_C", add ? MatConvert_SeqAIJPredict_SeqAIJ : nullptr));
  /* MatConvert(seqaij -> aijpredict) finds this on a matrix of the target type (PETSc's SeqAIJ does not know us). */
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatConvert_seqaij_seqaijpredict_C", add ? MatConvert_SeqAIJ_SeqAIJPredict : nullptr));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatAIJPredictGetFormat_C", add ? MatAIJPredictGetFormat_SeqAIJPredict : nullptr));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatAIJPredictGetReport_C", add ? MatAIJPredictGetReport_SeqAIJPredict : nullptr));
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace

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
.  -mat_aijpredict_defer_mults <k>  - products on cuSPARSE CSR before the analysis (default 10; 0: at once); then the analysis waits until it can pay
.  -mat_aijpredict_upload_share <f> - analyse and convert at the upload a matrix whose analysis (~2 ms) is at most this share of the upload's time (default 0.1, an upload of 20 ms; 0: never); a tenth of it bounds an analysis at the upload's partition planning
.  -mat_aijpredict_expected_mults <n> - products expected; conversion only when it pays (default: as many as so far)
.  -mat_aijpredict_use_gpu <bool>   - false runs everything on the CPU like `MATSEQAIJ`
.  -mat_aijpredict_preload <bool>   - load the library's CUDA modules (PetscScalar's kernels) when the per-process context is made, not inside the first product of each format (default true)
.  -mat_aijpredict_online <bool>    - time sampled products, refine the model, try the runner-up, then cuSPARSE CSR (ALG2 when it runs), once (default true)
.  -mat_aijpredict_free_band <f>    - online: csr_vector / csr_scalar, never measured on the matrix, are also tried when predicted within this fraction of short products' measured time (default 0.15; 0: off)
.  -mat_aijpredict_trace_ms <ms>     - under -info, report each product whose host time exceeds ms, with where it went (default 0.25)
.  -mat_aijpredict_trace_buffer      - keep those reports in memory (no -info needed) and print them at MatDestroy, with the host time between products
.  -mat_aijpredict_online_sample_max <n> - online: a settled plan times one product in 8, then each observation doubles the interval up to one in n (default 256; 8: no thinning)
.  -mat_aijpredict_online_first_spacing <n> - online: where the product takes at most 15% of the host time between products, a new plan's first 16 samples are every n-th product (default 8; 1: every product)
.  -mat_aijpredict_partition <bool> - row-partitioned multi-format plans when they pay (default true)
.  -mat_aijpredict_staged <bool>    - analyse and convert in parts over the next products, never waiting for the device (default true; false: inside the product that decides it)
.  -mat_aijpredict_stage_fraction <f> - a product's largest share of a staged conversion, as a fraction of its predicted time (default 0.03)
.  -mat_aijpredict_stage_duty <f>   - the most host time a staged step's parts take beyond the products they overlap, plus their passes' device time, as a share of the wall time since it began, gaps between products capped at 3x their recent median (default 0.01 with the step worker on a second CPU, else 0.0025; 0: a part at every product)
.  -mat_aijpredict_stage_overlap <f> - the share of a product's predicted time (if >= 30 us) a staged part is taken to overlap (default 0: all of its host time counts against the duty)
.  -mat_aijpredict_reserve <f>      - device memory set aside with the CSR copy for later layouts, a fraction of its bytes counted twice up to 64 MiB (default 1; 0: none; only while the GPU keeps half its memory free)
.  -mat_aijpredict_upload_pool <bool> - upload the CSR copy into a pooled block that destroyed matrices leave for later uploads (at most 256 MiB kept unused), with a free-memory reading of the last second (default true)
.  -mat_aijpredict_background <bool> - analyse and convert on a worker thread while the products run the current format (default false)
.  -mat_aijpredict_prefetch <bool> - staged: issue the analysis' device passes in the upload's product, read back at the next ones (default true)
.  -mat_aijpredict_prefetch_stream <bool> - with it: issue those passes on a stream of their own (default false)
.  -mat_aijpredict_host_bound_start <bool> - with it: csr_vector before the analysis where predicted no slower than cuSPARSE CSR (default true)
.  -mat_aijpredict_host_bound_start_us <us> - that switch only where cuSPARSE CSR is predicted at most this (default 25; 0: never)
.  -mat_aijpredict_first_solve_analysis <bool> - with prefetch and host_worker: analyse, hand over and install in the upload's solve (default true)
.  -mat_aijpredict_first_solve_convert_us <us> - with it: convert at once, in the upload's solve, a choice estimated at most this (default 200)
.  -mat_aijpredict_worker_convert <bool> - with it: such a conversion to sell_delta16, sell_sigma or sell runs on the step worker's stream (default true)
.  -mat_aijpredict_host_worker <bool> - staged: run the stages without CUDA calls on the step worker thread; needs a second CPU (default true)
.  -mat_aijpredict_host_copy        - without a GPU, multiply with a host copy refreshed like the device copy (testing)
-  -mat_aijpredict_view             - print the statistics, the prediction of every format, and the choice

   Notes:
   `MatConvert()` works both ways (`MAT_INITIAL_MATRIX`, `MAT_INPLACE_MATRIX`, `MAT_REUSE_MATRIX`), `MatDuplicate()`
   keeps the options, `MatBindToCPU()` runs the products as `MATSEQAIJ` until unbound, and `-mat_view ::ascii_info`
   says where the products run. Factorizations (ILU, ICC, LU) are SeqAIJ's.

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
   the diagonal block's product while it is in flight, then adds the off-diagonal block's product. Only the
   compositions that create blocks (preallocation, COO preallocation), the viewer and the conversions differ. */
namespace {
using mpiaij_prealloc    = PetscErrorCode (*)(Mat, PetscInt, const PetscInt[], PetscInt, const PetscInt[]);
using mpiaij_prealloccoo = PetscErrorCode (*)(Mat, PetscCount, PetscInt[], PetscInt[]);
/* MPIAIJ's own, the same for every MPIAIJ matrix */
mpiaij_prealloc    aijp_mpiaij_prealloc    = nullptr;
mpiaij_prealloccoo aijp_mpiaij_prealloccoo = nullptr;
PetscErrorCode (*aijp_mpiaij_view)(Mat, PetscViewer) = nullptr;

/* Converts the diagonal and off-diagonal blocks in place, reading the options with the MPI matrix's prefix. */
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
/* Makes the per-process contexts of the ranks of B's communicator that need one together (B's preallocation
   is collective), so that each cache file is read by one rank and broadcast: "rank 0 reads and broadcasts"
   for every group of ranks that share a GPU kind, instead of every rank reading the shared file system.
   Ranks that already have their context, or run on the CPU, only take part in the agreement. */
PetscErrorCode AIJPCollectiveContext(Mat B, Mat_SeqAIJPredict *p)
{
  MPI_Comm    comm = PetscObjectComm((PetscObject)B), sub = MPI_COMM_NULL;
  PetscMPIInt size;

  PetscFunctionBegin;
  const PetscMPIInt need = p->opt.use_gpu && aijp::device_available() && !AIJPContextMadeFor(p->opt) ? 1 : 0;
  PetscCallMPI(MPI_Comm_size(comm, &size));
  aijp::context *ctx = nullptr;
  if (size == 1) {
    if (need) PetscCall(AIJPGetContext(p, &ctx));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscMPIInt any = 0;
  PetscCallMPI(MPIU_Allreduce(&need, &any, 1, MPI_INT, MPI_MAX, comm));
  if (!any) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCallMPI(MPI_Comm_split(comm, need ? 0 : MPI_UNDEFINED, 0, &sub));
  if (!need) PetscFunctionReturn(PETSC_SUCCESS);
  aijp_bcast_comm        = sub;
  const PetscErrorCode e = AIJPGetContext(p, &ctx);
  aijp_bcast_comm        = MPI_COMM_NULL;
  PetscCallMPI(MPI_Comm_free(&sub));
  PetscCall(e);
  PetscFunctionReturn(PETSC_SUCCESS);
}
#endif

PetscErrorCode AIJPConvertBlocks(Mat B)
{
  Mat             blk[2];
  const PetscInt *colmap;

  PetscFunctionBegin;
  PetscCall(MatMPIAIJGetSeqAIJ(B, &blk[0], &blk[1], &colmap));
  aijp_defer_context = true;
  for (Mat b : blk) {
    PetscBool      is;
    PetscErrorCode e = PETSC_SUCCESS;
    if (!b) continue;
    PetscCall(PetscObjectTypeCompare((PetscObject)b, MATSEQAIJPREDICT, &is));
    if (!is) e = AIJPConvertInPlace(b, PetscObjectComm((PetscObject)B), ((PetscObject)B)->prefix);
    if (e) aijp_defer_context = false;
    PetscCall(e);
    if (B->boundtocpu) PetscCall(MatBindToCPU(b, PETSC_TRUE));
  }
  aijp_defer_context = false;
#if !defined(AIJP_PETSC_UNSUPPORTED_BUILD)
  PetscCall(AIJPCollectiveContext(B, AIJP(blk[0])));
#endif
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode MatMPIAIJSetPreallocation_MPIAIJPredict(Mat B, PetscInt d_nz, const PetscInt d_nnz[], PetscInt o_nz, const PetscInt o_nnz[])
{
  PetscFunctionBegin;
  PetscCall((*aijp_mpiaij_prealloc)(B, d_nz, d_nnz, o_nz, o_nnz));
  PetscCall(AIJPConvertBlocks(B));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* MPIAIJ's COO preallocation builds new SeqAIJ blocks (MatCreateSeqAIJWithArrays): convert them as well. */
PetscErrorCode MatSetPreallocationCOO_MPIAIJPredict(Mat B, PetscCount n, PetscInt i[], PetscInt j[])
{
  PetscFunctionBegin;
  PetscCall((*aijp_mpiaij_prealloccoo)(B, n, i, j));
  PetscCall(AIJPConvertBlocks(B));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* -mat_view ::ascii_info[_detail]: MPIAIJ's text, then per process where each block's products run. */
PetscErrorCode MatView_MPIAIJPredict(Mat A, PetscViewer viewer)
{
  PetscBool         isascii;
  PetscViewerFormat format;
  Mat               blk[2];
  const PetscInt   *colmap;

  PetscFunctionBegin;
  PetscCall((*aijp_mpiaij_view)(A, viewer));
  PetscCall(PetscObjectTypeCompare((PetscObject)viewer, PETSCVIEWERASCII, &isascii));
  if (!isascii) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscViewerGetFormat(viewer, &format));
  if (format != PETSC_VIEWER_ASCII_INFO && format != PETSC_VIEWER_ASCII_INFO_DETAIL) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(MatMPIAIJGetSeqAIJ(A, &blk[0], &blk[1], &colmap));
  std::string d = "(none)", o = "(none)";
  PetscBool   is;
  if (blk[0]) {
    PetscCall(PetscObjectTypeCompare((PetscObject)blk[0], MATSEQAIJPREDICT, &is));
    if (is) PetscCall(AIJPDescribe(blk[0], &d));
    else d = std::string("a ") + ((PetscObject)blk[0])->type_name + " block";
  }
  if (blk[1]) {
    PetscCall(PetscObjectTypeCompare((PetscObject)blk[1], MATSEQAIJPREDICT, &is));
    if (is) PetscCall(AIJPDescribe(blk[1], &o));
    else o = std::string("a ") + ((PetscObject)blk[1])->type_name + " block";
  }
  PetscMPIInt rank;
  PetscCallMPI(MPI_Comm_rank(PetscObjectComm((PetscObject)A), &rank));
  PetscCall(PetscViewerASCIIPushSynchronized(viewer));
  PetscCall(PetscViewerASCIISynchronizedPrintf(viewer, "[%d] aijpredict: diagonal block: %s; off-diagonal block: %s\n", rank, d.c_str(), o.c_str()));
  PetscCall(PetscViewerFlush(viewer));
  PetscCall(PetscViewerASCIIPopSynchronized(viewer));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode MatConvert_MPIAIJPredict_MPIAIJ(Mat A, MatType, MatReuse reuse, Mat *newmat)
{
  Mat B = *newmat;

  PetscFunctionBegin;
  if (reuse == MAT_REUSE_MATRIX) {
    PetscCall(MatCopy(A, *newmat, SAME_NONZERO_PATTERN));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (reuse == MAT_INITIAL_MATRIX) PetscCall(MatDuplicate(A, MAT_COPY_VALUES, &B));
  Mat             blk[2];
  const PetscInt *colmap;
  PetscCall(MatMPIAIJGetSeqAIJ(B, &blk[0], &blk[1], &colmap));
  for (Mat b : blk) { /* in place: the blocks stay the same objects */
    PetscBool is;
    if (!b) continue;
    PetscCall(PetscObjectTypeCompare((PetscObject)b, MATSEQAIJPREDICT, &is));
    if (is) PetscCall(MatConvert_SeqAIJPredict_SeqAIJ(b, MATSEQAIJ, MAT_INPLACE_MATRIX, &b));
  }
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatMPIAIJSetPreallocation_C", aijp_mpiaij_prealloc));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatSetPreallocationCOO_C", aijp_mpiaij_prealloccoo));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatConvert_mpiaijpredict_mpiaij_C", nullptr));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatConvert_mpiaij_mpiaijpredict_C", nullptr));
  B->ops->view = aijp_mpiaij_view;
  PetscCall(PetscFree(B->defaultvectype));
  PetscCall(PetscStrallocpy(VECSTANDARD, &B->defaultvectype));
  B->boundtocpu = PETSC_TRUE;
  PetscCall(PetscObjectChangeTypeName((PetscObject)B, MATMPIAIJ));
  *newmat = B;
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace

/* Makes B (an MPIAIJ matrix, preallocated or not) an MPIAIJPredict one in place. */
static PetscErrorCode AIJPMPIConvertInPlace(Mat B);

static PetscErrorCode MatConvert_MPIAIJ_MPIAIJPredict(Mat A, MatType, MatReuse reuse, Mat *newmat)
{
  Mat B = *newmat;

  PetscFunctionBegin;
  if (reuse == MAT_REUSE_MATRIX) {
    PetscCall(MatCopy(A, *newmat, SAME_NONZERO_PATTERN));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (reuse == MAT_INITIAL_MATRIX) PetscCall(MatDuplicate(A, MAT_COPY_VALUES, &B));
  PetscCall(AIJPMPIConvertInPlace(B));
  *newmat = B;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode AIJPMPIConvertInPlace(Mat B)
{
  PetscFunctionBegin;
  PetscCall(MatAIJPredictInitializePackage());
  if (!aijp_mpiaij_prealloc) {
    PetscCall(PetscObjectQueryFunction((PetscObject)B, "MatMPIAIJSetPreallocation_C", &aijp_mpiaij_prealloc));
    PetscCall(PetscObjectQueryFunction((PetscObject)B, "MatSetPreallocationCOO_C", &aijp_mpiaij_prealloccoo));
    aijp_mpiaij_view = B->ops->view;
    PetscCheck(aijp_mpiaij_prealloc && aijp_mpiaij_prealloccoo && aijp_mpiaij_view, PetscObjectComm((PetscObject)B), PETSC_ERR_PLIB, "MPIAIJ lacks MatMPIAIJSetPreallocation_C, MatSetPreallocationCOO_C or a viewer");
  }
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatMPIAIJSetPreallocation_C", MatMPIAIJSetPreallocation_MPIAIJPredict));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatSetPreallocationCOO_C", MatSetPreallocationCOO_MPIAIJPredict));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatConvert_mpiaijpredict_mpiaij_C", MatConvert_MPIAIJPredict_MPIAIJ));
  /* MatConvert(mpiaij -> aijpredict) finds this on a matrix of the target type. */
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatConvert_mpiaij_mpiaijpredict_C", MatConvert_MPIAIJ_MPIAIJPredict));
  B->ops->view  = MatView_MPIAIJPredict;
  B->boundtocpu = PETSC_FALSE; /* MatAssemblyEnd_MPIAIJ binds the blocks of a bound matrix */
  if (B->preallocated) PetscCall(AIJPConvertBlocks(B));
  PetscCall(AIJPSetDefaultVecType(B, PETSC_TRUE));
  PetscCall(PetscObjectChangeTypeName((PetscObject)B, MATMPIAIJPREDICT));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
   MATMPIAIJPREDICT - MATMPIAIJPREDICT = "mpiaijpredict" - A `MATMPIAIJ` matrix whose diagonal and off-diagonal
   blocks are `MATSEQAIJPREDICT`: each block's products run on the GPU in the format predicted fastest for it.
   `-mat_type aijpredict` gives this type on more than one process. Options as for `MATSEQAIJPREDICT`, read
   with this matrix's prefix when it is preallocated.

  Level: beginner

.seealso: `MATSEQAIJPREDICT`, `MATMPIAIJCUSPARSE`, `MATMPIAIJ`
M*/
PETSC_EXTERN PetscErrorCode MatCreate_MPIAIJPredict(Mat A)
{
  PetscFunctionBegin;
  PetscCall(MatSetType(A, MATMPIAIJ));
  PetscCall(AIJPMPIConvertInPlace(A));
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
  PetscCall(AIJPSaveOnline());
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
