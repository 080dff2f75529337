static char help[] = "Times KSP solves of one matrix with several matrix types inside one process, interleaved.\n\
\n\
Solve times of small matrices are bound by the host (launches, synchronisations), and on a shared machine\n\
they move by 10-30 % from one process to the next, which hides differences of a few percent between two\n\
matrix types compared in separate processes. Here every round converts the assembled AIJ matrix to each\n\
type in turn (MatConvert, MAT_INITIAL_MATRIX; for SELL types a copy preallocated with the row lengths: a\n\
new matrix, so the upload to the GPU and, for aijpredict, the analysis and conversion happen again inside\n\
the first solve), solves -solves times, destroys it; the\n\
order of the types alternates from round to round. Reported per type: the median over the rounds of the\n\
first solve (setup included) and of the later solves, the iterations (of the last round; * where\n\
rounds differed), and for each type after the first\n\
the median over rounds of the ratio to the first type's time in the same round (the paired ratio).\n\
With -solves > 1, also per solve index: the paired ratio of the k-th solve (median over rounds), and\n\
the worst of them over the later solves (the solve a conversion lands in shows there, where the median\n\
of the later solves hides it), and each round's slowest later solve against the first type's median later\n\
solve of that round, for every type (the first type's own is the noise floor; a step paced by wall time\n\
lands at other solve indices in other rounds, which the median per index hides).\n\
With -log_view, each type's later solves are in a log stage of their own ('Solves <type>').\n\
The right-hand side is b = A * ones (computed on the host), the initial guess zero.\n\
Options:\n\
  -f <file>          Matrix Market file (.mtx or .mtx.gz)\n\
  -gen <spec>        generator spec, used when -f is not given (default lap7:32x32x32)\n\
  -types <list>      comma-separated matrix types; the first is the reference (default aijcusparse,aijpredict)\n\
  -rounds <r>        rounds (default 11)\n\
  -solves <k>        solves per matrix per round, the first one with the setup (default 3)\n\
  -mults <k>         after the solves of each type in each round, k more products y = A x in a log stage of\n\
                     their own ('SpMV <type>'), and a table of the steady-state time per product: MatMult's\n\
                     GPU time per product (with -log_view_gpu_time: PETSc's CUDA events around the kernels,\n\
                     as -log_view reports it, but without the first products' one-time costs: lazy module\n\
                     loading, cuSPARSE's preprocessing, aijpredict's analysis and conversion), MatMult's\n\
                     event time per product, and the median over rounds of the speed-up over the first\n\
                     type in the same round (default 0: none)\n\
  -interleave        every type's matrix is set up first, then the k-th solve of each type runs before the\n\
                     (k+1)-th of any (the order alternating from solve to solve and round to round), so that\n\
                     the paired ratio of a solve index compares solves a few milliseconds apart rather than\n\
                     a whole type's solves apart: the host's and the GPU's clocks drift by several percent\n\
                     over a second on the H100 machine (default: false, each type's solves in a row)\n\
  -inject_us <us>    a calibration of what host time costs a solve: the solves of the type at -inject_type\n\
                     (index in -types, default 1) busy-wait this long on the host at KSP iteration\n\
                     -inject_at (default 5), touching -inject_touch_kb KiB of memory while they wait\n\
                     (default 0), every -inject_every-th solve (default 1) (default 0: none)\n\
  -inject_thread     the busy-wait runs on a helper thread instead, kept off the solving thread's CPU\n\
                     (started before the solves, woken at that iteration; the solve does not wait for\n\
                     it): what a worker thread's host work costs the solves beside it (default: false)\n\
  -time_mult          the host time of each MatMult of the later solves (the matrix type's mult operation,\n\
                     wrapped: launches included, PETSc's MatMult checks excluded), per type the median over\n\
                     rounds of each round's median and of its difference from the first type's, in the solves'\n\
                     own cache state; with user-space hardware counters of those calls (instructions, L1\n\
                     instruction-cache and instruction-TLB misses) where perf_event_open allows them, and\n\
                     the stream time of each (a CUDA event pair around the call on PETSc's stream: from\n\
                     before the call to the end of its last kernel, the product's share of the solve's\n\
                     critical path where the device waits for the host)\n\
KSP and PC options (-ksp_type, -pc_type, -ksp_rtol, -ksp_max_it, ...) apply to every solve.\n";

#include <petscksp.h>
#include <petscaijpredict.h>
#include <petsc/private/matimpl.h> /* -time_mult wraps the matrix type's mult operation */
#include <petscdevice_cuda.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

#include <sched.h>
#if defined(__linux__)
  #include <linux/perf_event.h>
  #include <sys/syscall.h>
  #include <unistd.h>
#endif
#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "load_matrix.hpp"

/* Waits for the GPU, where there is one (the solves' last norms already wait for the products; this also
   covers anything left queued). */
static bool HaveDevice(void)
{
  static int devices = -1;
  if (devices < 0 && cudaGetDeviceCount(&devices) != cudaSuccess) {
    (void)cudaGetLastError();
    devices = 0;
  }
  return devices > 0;
}

static PetscErrorCode SyncDevice(void)
{
  PetscFunctionBeginUser;
  if (HaveDevice()) {
    const cudaError_t e = cudaDeviceSynchronize();
    PetscCheck(e == cudaSuccess, PETSC_COMM_SELF, PETSC_ERR_GPU, "cudaDeviceSynchronize: %s", cudaGetErrorString(e));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static double Median(std::vector<double> v)
{
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A new matrix of type `type` holding A0. MatConvert from AIJ to a SELL type (sell, sellcuda) goes through
   PETSc's MatConvert_Basic, which inserts every row into an unpreallocated matrix: it did not finish within
   150 s for 14.5M nonzeros on the H100 host (bench/results/2026-11-23_h100_solve_ab_sellcuda.txt). Those types
   are preallocated with the exact row lengths and filled row by row here; every other type uses MatConvert. */
static PetscErrorCode ConvertTo(Mat A0, const char *type, Mat *B)
{
  PetscBool sell;
  PetscInt  m, n;

  PetscFunctionBeginUser;
  PetscCall(MatGetSize(A0, &m, &n));
  PetscCall(MatCreate(PETSC_COMM_SELF, B));
  PetscCall(MatSetSizes(*B, m, n, m, n));
  PetscCall(MatSetType(*B, type));
  PetscCall(PetscObjectHasFunction((PetscObject)*B, "MatSeqSELLSetPreallocation_C", &sell));
  if (!sell) {
    PetscCall(MatDestroy(B));
    PetscCall(MatConvert(A0, type, MAT_INITIAL_MATRIX, B));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  {
    std::vector<PetscInt> len(m);
    for (PetscInt r = 0; r < m; ++r) {
      PetscInt nc; /* MatRestoreRow zeroes the count it is given */
      PetscCall(MatGetRow(A0, r, &nc, nullptr, nullptr));
      len[r] = nc;
      PetscCall(MatRestoreRow(A0, r, &nc, nullptr, nullptr));
    }
    PetscCall(MatSeqSELLSetPreallocation(*B, 0, len.data()));
  }
  PetscCall(MatSetOption(*B, MAT_NEW_NONZERO_ALLOCATION_ERR, PETSC_TRUE));
  for (PetscInt r = 0; r < m; ++r) {
    PetscInt           nc;
    const PetscInt    *cols;
    const PetscScalar *vals;
    PetscCall(MatGetRow(A0, r, &nc, &cols, &vals));
    PetscCall(MatSetValues(*B, 1, &r, nc, cols, vals, INSERT_VALUES));
    PetscCall(MatRestoreRow(A0, r, &nc, &cols, &vals));
  }
  PetscCall(MatAssemblyBegin(*B, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(*B, MAT_FINAL_ASSEMBLY));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Steady-state products of one type in one round (-mults): per product, MatMult's GPU time and event time (s). */
struct ProductTimes {
  double gpu = 0, event = 0;
};

/* `mults` products y = B x in the log stage 'SpMV <type>'; their MatMult GPU time and event time per product. */
static PetscErrorCode TimeProducts(Mat B, Vec x, const char *type, PetscInt mults, ProductTimes *t)
{
  Vec                y;
  PetscLogStage      stage;
  PetscLogEvent      mult;
  PetscEventPerfInfo before, after;
  char               name[64];

  PetscFunctionBeginUser;
  PetscCall(PetscSNPrintf(name, sizeof(name), "SpMV %s", type));
  PetscCall(PetscLogStageGetId(name, &stage));
  if (stage < 0) PetscCall(PetscLogStageRegister(name, &stage));
  PetscCall(PetscLogEventGetId("MatMult", &mult));
  PetscCall(VecDuplicate(x, &y));
  PetscCall(SyncDevice());
  PetscCall(PetscLogStagePush(stage));
  PetscCall(PetscLogEventGetPerfInfo(stage, mult, &before));
  for (PetscInt k = 0; k < mults; ++k) PetscCall(MatMult(B, x, y));
  PetscCall(SyncDevice());
  PetscCall(PetscLogEventGetPerfInfo(stage, mult, &after));
  PetscCall(PetscLogStagePop());
  PetscCall(VecDestroy(&y));
  const int n = after.count - before.count;
  PetscCheck(n == mults, PETSC_COMM_SELF, PETSC_ERR_PLIB, "stage '%s' logged %d MatMult events for %" PetscInt_FMT " products", name, n, mults);
#if PetscDefined(HAVE_DEVICE)
  t->gpu = (after.GpuTime - before.GpuTime) / n;
#endif
  t->event = (after.time - before.time) / n;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* -time_mult: user-space hardware counters of this thread, read around each product (a group: one read). */
struct MultCounters {
  static constexpr int n = 3; /* instructions, L1 instruction-cache misses, instruction-TLB misses */
  int         fd[n] = {-1, -1, -1};
  std::string why; /* empty: counting */
  bool        open()
  {
#if defined(__linux__)
    const unsigned long long config[n][2] = {
      {PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
      {PERF_TYPE_HW_CACHE, PERF_COUNT_HW_CACHE_L1I | (PERF_COUNT_HW_CACHE_OP_READ << 8) | (PERF_COUNT_HW_CACHE_RESULT_MISS << 16)},
      {PERF_TYPE_HW_CACHE, PERF_COUNT_HW_CACHE_ITLB | (PERF_COUNT_HW_CACHE_OP_READ << 8) | (PERF_COUNT_HW_CACHE_RESULT_MISS << 16)},
    };
    for (int i = 0; i < n; ++i) {
      perf_event_attr a;
      std::memset(&a, 0, sizeof(a));
      a.size           = sizeof(a);
      a.type           = (unsigned)config[i][0];
      a.config         = config[i][1];
      a.exclude_kernel = 1;
      a.exclude_hv     = 1;
      a.read_format    = PERF_FORMAT_GROUP;
      fd[i]            = (int)syscall(SYS_perf_event_open, &a, 0, -1, i == 0 ? -1 : fd[0], 0);
      if (fd[i] < 0) {
        why = std::string("perf_event_open: ") + std::strerror(errno);
        close_all();
        return false;
      }
    }
    return true;
#else
    why = "no perf_event_open here";
    return false;
#endif
  }
  void close_all()
  {
#if defined(__linux__)
    for (int &f : fd)
      if (f >= 0) {
        close(f);
        f = -1;
      }
#endif
  }
  bool read_into(std::array<long long, n> &v) const
  {
#if defined(__linux__)
    unsigned long long buf[1 + n];
    if (fd[0] < 0 || ::read(fd[0], buf, sizeof(buf)) != (ssize_t)sizeof(buf)) return false;
    for (int i = 0; i < n; ++i) v[i] = (long long)buf[1 + i];
    return true;
#else
    return false;
#endif
  }
};

/* -time_mult: one matrix's wrapped mult operation and what its products of the later solves took. */
struct MultProbe {
  PetscErrorCode (*mult)(Mat, Vec, Vec) = nullptr;
  bool                                  record = false; /* set during the later solves */
  std::vector<double>                   us;
  std::vector<std::array<long long, MultCounters::n>> counts;
  /* A pair of CUDA events around each product of a solve, on PETSc's stream: the stream's time from before the
     call to after its last kernel (read after the solve's final synchronisation; the events are reused). */
  std::vector<std::array<cudaEvent_t, 2>> events;
  size_t                                  used = 0;
  std::vector<double>                     gpu_us;
  ~MultProbe()
  {
    for (auto &e : events) {
      (void)cudaEventDestroy(e[0]);
      (void)cudaEventDestroy(e[1]);
    }
  }
};
static std::map<Mat, MultProbe *> probes;
static PetscBool                  time_mult = PETSC_FALSE;
static MultCounters               counters;

static PetscErrorCode ProbedMult(Mat A, Vec x, Vec y)
{
  MultProbe                           *p = probes.at(A);
  std::array<long long, MultCounters::n> c0{}, c1{};

  PetscFunctionBeginUser;
  cudaStream_t stream = nullptr;
  const bool   paired = p->record && HaveDevice();
  if (paired) {
    PetscCall(PetscGetCurrentCUDAStream(&stream));
    if (p->used == p->events.size()) {
      std::array<cudaEvent_t, 2> e{};
      PetscCallCUDA(cudaEventCreate(&e[0]));
      PetscCallCUDA(cudaEventCreate(&e[1]));
      p->events.push_back(e);
    }
    PetscCallCUDA(cudaEventRecord(p->events[p->used][0], stream));
  }
  const bool counted = p->record && counters.read_into(c0);
  const auto t0      = std::chrono::steady_clock::now();
  PetscCall(p->mult(A, x, y));
  const auto t1 = std::chrono::steady_clock::now();
  if (paired) PetscCallCUDA(cudaEventRecord(p->events[p->used++][1], stream));
  if (counted && counters.read_into(c1)) {
    std::array<long long, MultCounters::n> d;
    for (int i = 0; i < MultCounters::n; ++i) d[i] = c1[i] - c0[i];
    p->counts.push_back(d);
  }
  if (p->record) p->us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* One type's matrix, vectors and KSP in one round, and its solves' times. */
struct Solver {
  Mat                 B   = nullptr;
  Vec                 x   = nullptr, b = nullptr;
  KSP                 ksp = nullptr;
  PetscLogStage       stage = -1;
  PetscInt            done  = 0; /* solves so far */
  double              first = 0;
  std::vector<double> later;
  MultProbe           probe; /* -time_mult */
};

/* -inject_us: host time spent inside the solve at one iteration, to calibrate what it costs the solve. */
struct Injection {
  PetscReal         us = 0;
  PetscInt          at = 5, every = 1, touch_kb = 0;
  PetscInt          solves = 0; /* KSPSolve calls so far (counted at iteration 0) */
  std::vector<char> buffer;
  /* -inject_thread: the helper that busy-waits instead of the solving thread */
  PetscBool               thread = PETSC_FALSE;
  std::thread             helper;
  std::mutex              mu;
  std::condition_variable cv;
  long                    requested = 0, served = 0;
  int                     helper_cpu = -1, solver_cpu = -1;
};

static void Spin(Injection *inj)
{
  const auto t0 = std::chrono::steady_clock::now();
  size_t     k  = 0;
  do {
    for (int i = 0; i < 64 && !inj->buffer.empty(); ++i, k += 64) inj->buffer[k % inj->buffer.size()] += 1;
  } while (std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() < inj->us);
}

/* The helper of -inject_thread: every CPU of the process but the solving thread's (where there is another). */
static void StartHelper(Injection *inj)
{
  inj->solver_cpu = sched_getcpu();
  inj->helper     = std::thread([inj] {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) >= 2 && CPU_ISSET(inj->solver_cpu, &set)) {
      CPU_CLR(inj->solver_cpu, &set);
      (void)sched_setaffinity(0, sizeof(set), &set);
    }
    for (;;) {
      std::unique_lock<std::mutex> lock(inj->mu);
      inj->cv.wait(lock, [inj] { return inj->requested > inj->served || inj->requested < 0; });
      if (inj->requested < 0) return;
      lock.unlock();
      Spin(inj);
      inj->helper_cpu = sched_getcpu();
      lock.lock();
      ++inj->served;
    }
  });
}

static void StopHelper(Injection *inj)
{
  if (!inj->helper.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(inj->mu);
    inj->requested = -1;
  }
  inj->cv.notify_one();
  inj->helper.join();
}

static PetscErrorCode InjectMonitor(KSP, PetscInt it, PetscReal, void *ctx)
{
  Injection *inj = (Injection *)ctx;

  PetscFunctionBeginUser;
  if (it == 0) ++inj->solves;
  if (it != inj->at || (inj->solves - 1) % inj->every != 0) PetscFunctionReturn(PETSC_SUCCESS);
  if (inj->thread) {
    {
      std::lock_guard<std::mutex> lock(inj->mu);
      ++inj->requested;
    }
    inj->cv.notify_one();
  } else Spin(inj);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Converts A0 to `type` (nothing uploaded yet: the first solve does it) and makes its KSP. */
static PetscErrorCode SolverSetUp(Mat A0, const char *type, Vec b_host, Solver *s, Injection *inj)
{
  PetscFunctionBeginUser;
  PetscCall(ConvertTo(A0, type, &s->B));
  PetscCall(MatCreateVecs(s->B, &s->x, &s->b));
  PetscCall(VecCopy(b_host, s->b));
  PetscCall(KSPCreate(PETSC_COMM_SELF, &s->ksp));
  PetscCall(KSPSetOperators(s->ksp, s->B, s->B));
  PetscCall(KSPSetFromOptions(s->ksp));
  if (inj) PetscCall(KSPMonitorSet(s->ksp, InjectMonitor, inj, nullptr));
  if (time_mult) {
    s->probe.mult   = s->B->ops->mult;
    s->B->ops->mult = ProbedMult;
    probes[s->B]    = &s->probe;
  }
  /* The later solves of each type in a log stage of their own ('Solves <type>'), so that -log_view splits
     their events (MatMult, the vector operations, PCApply) by matrix type. */
  char name[64];
  PetscCall(PetscSNPrintf(name, sizeof(name), "Solves %s", type));
  PetscCall(PetscLogStageGetId(name, &s->stage));
  if (s->stage < 0) PetscCall(PetscLogStageRegister(name, &s->stage));
  PetscCall(SyncDevice());
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* One solve from a zero guess, timed from a synchronised device to a synchronised device. */
static PetscErrorCode SolverSolve(Solver *s)
{
  PetscLogDouble t0, t1;

  PetscFunctionBeginUser;
  PetscCall(VecSet(s->x, 0.0));
  PetscCall(SyncDevice());
  if (s->done > 0) PetscCall(PetscLogStagePush(s->stage));
  s->probe.record = s->done > 0; /* the first solve's products include the upload (and aijpredict's prefetch) */
  PetscCall(PetscTime(&t0));
  PetscCall(KSPSolve(s->ksp, s->b, s->x));
  PetscCall(SyncDevice());
  PetscCall(PetscTime(&t1));
  if (s->done > 0) PetscCall(PetscLogStagePop());
  for (size_t i = 0; i < s->probe.used; ++i) { /* -time_mult: the products' event pairs, complete after the sync */
    float ms = 0;
    PetscCallCUDA(cudaEventElapsedTime(&ms, s->probe.events[i][0], s->probe.events[i][1]));
    s->probe.gpu_us.push_back(1e3 * ms);
  }
  s->probe.used = 0;
  if (s->done == 0) s->first = t1 - t0;
  else s->later.push_back(t1 - t0);
  ++s->done;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* The steady-state products (mults > 0), then everything destroyed. */
static PetscErrorCode SolverFinish(Solver *s, const char *type, PetscInt mults, PetscInt *its, ProductTimes *products)
{
  PetscFunctionBeginUser;
  PetscCall(KSPGetIterationNumber(s->ksp, its));
  if (mults > 0) PetscCall(TimeProducts(s->B, s->x, type, mults, products));
  if (s->probe.mult) {
    s->B->ops->mult = s->probe.mult;
    probes.erase(s->B);
  }
  PetscCall(KSPDestroy(&s->ksp));
  PetscCall(VecDestroy(&s->x));
  PetscCall(VecDestroy(&s->b));
  PetscCall(MatDestroy(&s->B));
  PetscFunctionReturn(PETSC_SUCCESS);
}

int main(int argc, char **argv)
{
  Mat         A0;
  Vec         u, b;
  char        file[PETSC_MAX_PATH_LEN] = "", spec[256] = "lap7:32x32x32", types_opt[256] = "aijcusparse,aijpredict";
  PetscInt    rounds = 11, solves = 3, mults = 0;
  PetscBool   interleave = PETSC_FALSE;
  PetscMPIInt size;

  PetscFunctionBeginUser;
  PetscCall(PetscInitialize(&argc, &argv, nullptr, help));
  PetscCall(MatAIJPredictInitializePackage());
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &size));
  PetscCheck(size == 1, PETSC_COMM_WORLD, PETSC_ERR_SUP, "aijp_solve_ab runs on one process");
  PetscCall(PetscOptionsGetString(nullptr, nullptr, "-f", file, sizeof(file), nullptr));
  PetscCall(PetscOptionsGetString(nullptr, nullptr, "-gen", spec, sizeof(spec), nullptr));
  PetscCall(PetscOptionsGetString(nullptr, nullptr, "-types", types_opt, sizeof(types_opt), nullptr));
  PetscCall(PetscOptionsGetInt(nullptr, nullptr, "-rounds", &rounds, nullptr));
  PetscCall(PetscOptionsGetInt(nullptr, nullptr, "-solves", &solves, nullptr));
  PetscCall(PetscOptionsGetInt(nullptr, nullptr, "-mults", &mults, nullptr));
  PetscCall(PetscOptionsGetBool(nullptr, nullptr, "-interleave", &interleave, nullptr));
  PetscCall(PetscOptionsGetBool(nullptr, nullptr, "-time_mult", &time_mult, nullptr));
  if (time_mult && !counters.open()) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "-time_mult: no hardware counters (%s): host times only\n", counters.why.c_str()));
  Injection inj;
  PetscInt  inject_type = 1;
  PetscCall(PetscOptionsGetReal(nullptr, nullptr, "-inject_us", &inj.us, nullptr));
  PetscCall(PetscOptionsGetInt(nullptr, nullptr, "-inject_type", &inject_type, nullptr));
  PetscCall(PetscOptionsGetInt(nullptr, nullptr, "-inject_at", &inj.at, nullptr));
  PetscCall(PetscOptionsGetInt(nullptr, nullptr, "-inject_every", &inj.every, nullptr));
  PetscCall(PetscOptionsGetInt(nullptr, nullptr, "-inject_touch_kb", &inj.touch_kb, nullptr));
  PetscCall(PetscOptionsGetBool(nullptr, nullptr, "-inject_thread", &inj.thread, nullptr));
  PetscCheck(inj.us >= 0 && inj.at >= 0 && inj.every >= 1 && inj.touch_kb >= 0, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-inject_us, -inject_at, -inject_touch_kb must be >= 0 and -inject_every >= 1");
  inj.buffer.assign((size_t)inj.touch_kb * 1024, 0);
  if (inj.thread && inj.us > 0) StartHelper(&inj);
  PetscCheck(rounds > 0 && solves > 0, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-rounds and -solves must be positive");
  PetscCheck(mults >= 0, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-mults must be >= 0");
  if (mults > 0) {
    PetscBool logging;
    PetscCall(PetscLogIsActive(&logging));
    if (!logging) PetscCall(PetscLogDefaultBegin()); /* the stage's MatMult events are read back */
  }
  std::vector<std::string> types;
  {
    std::stringstream ss(types_opt);
    std::string t;
    while (std::getline(ss, t, ','))
      if (!t.empty()) types.push_back(t);
  }
  PetscCheck(types.size() >= 2, PETSC_COMM_WORLD, PETSC_ERR_ARG_WRONG, "-types needs at least two matrix types, got '%s'", types_opt);

  aijp::csr_matrix<double> h;
  PetscCall(LoadMatrix(file, spec, &h));
  PetscCheck(h.rows == h.cols, PETSC_COMM_WORLD, PETSC_ERR_ARG_SIZ, "KSP needs a square matrix; %s is %lld x %lld", file[0] ? file : spec, (long long)h.rows, (long long)h.cols);
  const PetscInt m = (PetscInt)h.rows;
  {
    std::vector<PetscInt> nnz(m);
    for (PetscInt r = 0; r < m; ++r) nnz[r] = (PetscInt)(h.row_ptr[r + 1] - h.row_ptr[r]);
    PetscCall(MatCreateSeqAIJ(PETSC_COMM_SELF, m, m, 0, nnz.data(), &A0));
  }
  for (PetscInt r = 0; r < m; ++r) {
    const PetscInt           ncols = (PetscInt)(h.row_ptr[r + 1] - h.row_ptr[r]);
    std::vector<PetscInt>    cols(ncols);
    std::vector<PetscScalar> vals(ncols);
    for (PetscInt k = 0; k < ncols; ++k) {
      cols[k] = (PetscInt)h.col_idx[h.row_ptr[r] + k];
      vals[k] = (PetscScalar)h.values[h.row_ptr[r] + k];
    }
    PetscCall(MatSetValues(A0, 1, &r, ncols, cols.data(), vals.data(), INSERT_VALUES));
  }
  PetscCall(MatAssemblyBegin(A0, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(A0, MAT_FINAL_ASSEMBLY));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "Matrix %s: %lld rows, %lld nonzeros; %" PetscInt_FMT " rounds of %" PetscInt_FMT " solves per type\n", file[0] ? file : spec, (long long)h.rows, (long long)h.nnz(), rounds, solves));
  h = aijp::csr_matrix<double>();
  PetscCall(MatCreateVecs(A0, &u, &b));
  PetscCall(VecSet(u, 1.0));
  PetscCall(MatMult(A0, u, b));

  const size_t                     nt = types.size();
  PetscCheck(inj.us == 0 || (inject_type >= 0 && (size_t)inject_type < nt), PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-inject_type %" PetscInt_FMT " is not an index into -types", inject_type);
  const auto inject_at = [&](size_t k) -> Injection * { return inj.us > 0 && (PetscInt)k == inject_type ? &inj : nullptr; };
  std::vector<std::vector<double>> first(nt), later(nt);
  std::vector<std::vector<double>> mult_us(nt); /* -time_mult: per type, each round's median host time per product */
  std::vector<std::vector<double>> mult_gpu_us(nt); /* -time_mult: per type, each round's median event-pair time */
  std::vector<std::vector<std::array<double, MultCounters::n>>> mult_counts(nt);
  std::vector<std::vector<std::vector<double>>> each(nt); /* [type][round][solve index - 1]: the later solves */
  std::vector<std::vector<ProductTimes>> products(nt);
  std::vector<PetscInt>            its(nt, -1);
  std::vector<bool>                same_its(nt, true);
  for (PetscInt r = 0; r < rounds; ++r) {
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "round %2" PetscInt_FMT ":", r + 1));
    /* The order of the types alternates from round to round (and, interleaved, from solve to solve). */
    const auto order = [&](size_t i, PetscInt j) { return ((r + (interleave ? j : 0)) % 2 == 0) ? i : nt - 1 - i; };
    std::vector<Solver> solver(nt);
    const auto finish = [&](size_t k) -> PetscErrorCode {
      PetscInt     n = 0;
      ProductTimes pt;
      PetscFunctionBeginUser;
      PetscCall(SolverFinish(&solver[k], types[k].c_str(), mults, &n, &pt));
      products[k].push_back(pt);
      /* Another plan in a later round (online corrections) may reorder sums and move the count a little. */
      if (its[k] >= 0 && its[k] != n) same_its[k] = false;
      its[k] = n;
      if (time_mult) {
        const MultProbe &pr = solver[k].probe;
        mult_us[k].push_back(Median(pr.us));
        mult_gpu_us[k].push_back(Median(pr.gpu_us));
        std::array<double, MultCounters::n> c{};
        for (int i = 0; i < MultCounters::n; ++i) {
          std::vector<double> v;
          for (const auto &d : pr.counts) v.push_back((double)d[i]);
          c[i] = Median(v);
        }
        mult_counts[k].push_back(c);
      }
      first[k].push_back(solver[k].first);
      later[k].push_back(Median(solver[k].later));
      each[k].push_back(solver[k].later);
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  %s %" PetscInt_FMT " its, %.6f s", types[k].c_str(), n, solver[k].first));
      for (double t : solver[k].later) PetscCall(PetscPrintf(PETSC_COMM_WORLD, " %.6f", t));
      PetscFunctionReturn(PETSC_SUCCESS);
    };
    if (interleave) {
      for (size_t i = 0; i < nt; ++i) PetscCall(SolverSetUp(A0, types[order(i, 0)].c_str(), b, &solver[order(i, 0)], inject_at(order(i, 0))));
      for (PetscInt j = 0; j < solves; ++j)
        for (size_t i = 0; i < nt; ++i) PetscCall(SolverSolve(&solver[order(i, j)]));
      for (size_t i = 0; i < nt; ++i) PetscCall(finish(order(i, 0)));
    } else {
      for (size_t i = 0; i < nt; ++i) {
        const size_t k = order(i, 0);
        PetscCall(SolverSetUp(A0, types[k].c_str(), b, &solver[k], inject_at(k)));
        for (PetscInt j = 0; j < solves; ++j) PetscCall(SolverSolve(&solver[k]));
        PetscCall(finish(k));
      }
    }
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "\n"));
  }
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-14s %6s %14s %14s %16s %16s %14s %14s\n", "type", "its", "first s (med)", "later s (med)", "first paired x", "later paired x", "first fastest", "later fastest"));
  for (size_t k = 0; k < nt; ++k) {
    std::vector<double> pf, pl;
    for (PetscInt r = 0; r < rounds; ++r) {
      pf.push_back(first[k][r] / first[0][r]);
      if (solves > 1) pl.push_back(later[k][r] / later[0][r]);
    }
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-14s %6" PetscInt_FMT "%s%14.6f %14.6f %16.3f %16.3f %14.6f %14.6f\n", types[k].c_str(), its[k], same_its[k] ? " " : "*", Median(first[k]), solves > 1 ? Median(later[k]) : 0.0, Median(pf), solves > 1 ? Median(pl) : 0.0,
                          *std::min_element(first[k].begin(), first[k].end()), solves > 1 ? *std::min_element(later[k].begin(), later[k].end()) : 0.0));
  }
  if (solves > 1) {
    /* Per solve index: a conversion inside one of the later solves shows in that index only. */
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "Paired ratio per later solve (median over rounds of this type's k-th solve / %s's k-th solve):\n", types[0].c_str()));
    for (size_t k = 1; k < nt; ++k) {
      double   worst = 0;
      PetscInt worst_at = 0;
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-14s", types[k].c_str()));
      for (PetscInt j = 0; j + 1 < solves; ++j) {
        std::vector<double> pj;
        for (PetscInt r = 0; r < rounds; ++r) pj.push_back(each[k][r][j] / each[0][r][j]);
        const double q = Median(pj);
        if (q > worst) {
          worst    = q;
          worst_at = j + 2;
        }
        PetscCall(PetscPrintf(PETSC_COMM_WORLD, " %.3f", q));
      }
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "\n%-14s worst later solve paired x %.3f (solve %" PetscInt_FMT ")\n", types[k].c_str(), worst, worst_at));
    }
    /* A step paced by wall time (-mat_aijpredict_stage_duty) lands in other solves in other rounds, where the
       median per solve index hides it: each round's slowest later solve against the median later solve of
       the first type in the same round, for every type, the first included (its own value is the noise
       floor of the metric); and each round's later solves together. */
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "Slowest later solve of each round / %s's median later solve in that round, then all later solves / %s's:\n", types[0].c_str(), types[0].c_str()));
    for (size_t k = 0; k < nt; ++k) {
      std::vector<double> slowest, total;
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-14s", types[k].c_str()));
      for (PetscInt r = 0; r < rounds; ++r) {
        const std::vector<double> base(each[0][r].begin(), each[0][r].begin() + (solves - 1));
        const double med = Median(base);
        double worst = 0, sum = 0, sum0 = 0;
        for (PetscInt j = 0; j + 1 < solves; ++j) {
          worst = std::max(worst, each[k][r][j] / med);
          sum += each[k][r][j];
          sum0 += each[0][r][j];
        }
        slowest.push_back(worst);
        total.push_back(sum / sum0);
        PetscCall(PetscPrintf(PETSC_COMM_WORLD, " %.3f", worst));
      }
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "   median slowest %.3f, max %.3f; all later solves %.4f (median over rounds)\n", Median(slowest), *std::max_element(slowest.begin(), slowest.end()), Median(total)));
    }
  }
  if (time_mult) {
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "Host time of each MatMult of the later solves (-time_mult; the type's mult operation), median over rounds of each round's median:\n"));
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-14s %10s %14s %14s %14s %14s %12s %14s\n", "type", "us", "us - first", "instructions", "L1i misses", "iTLB misses", "stream us", "stream - first"));
    for (size_t k = 0; k < nt; ++k) {
      std::vector<double> d, g;
      std::array<std::vector<double>, MultCounters::n> c;
      for (PetscInt r = 0; r < rounds; ++r) {
        d.push_back(mult_us[k][r] - mult_us[0][r]);
        g.push_back(mult_gpu_us[k][r] - mult_gpu_us[0][r]);
        for (int i = 0; i < MultCounters::n; ++i) c[i].push_back(mult_counts[k][r][i]);
      }
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-14s %10.3f %14.3f %14.0f %14.1f %14.1f %12.3f %14.3f\n", types[k].c_str(), Median(mult_us[k]), Median(d), Median(c[0]), Median(c[1]), Median(c[2]),
                            Median(mult_gpu_us[k]), Median(g)));
    }
    if (!counters.why.empty()) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "(counters: %s)\n", counters.why.c_str()));
  }
  if (mults > 0) {
    /* The speed-up over the first type: its per-product time over this type's, paired within each round. */
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "Steady-state products after the solves (%" PetscInt_FMT " per type per round; GPU time needs -log_view_gpu_time):\n", mults));
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-14s %14s %14s %16s %16s\n", "type", "gpu us (med)", "event us (med)", "gpu speed-up x", "event speed-up x"));
    for (size_t k = 0; k < nt; ++k) {
      std::vector<double> g, e, sg, se;
      for (PetscInt r = 0; r < rounds; ++r) {
        const ProductTimes &t = products[k][r], &t0 = products[0][r];
        g.push_back(t.gpu * 1e6);
        e.push_back(t.event * 1e6);
        if (t.gpu > 0) sg.push_back(t0.gpu / t.gpu);
        if (t.event > 0) se.push_back(t0.event / t.event);
      }
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-14s %14.3f %14.3f %16.3f %16.3f\n", types[k].c_str(), Median(g), Median(e), Median(sg), Median(se)));
    }
  }
  {
    bool same = true;
    for (size_t k = 0; k < nt; ++k) same = same && its[k] == its[0] && same_its[k];
    /* Reordered sums (another SpMV kernel) may move a long solve's iteration count a little: reported, not an error. */
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, same ? "iterations: the same for every type\n" : "iterations: differ between the types or the rounds\n"));
  }
  if (inj.helper.joinable()) {
    StopHelper(&inj);
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "injection helper: %ld busy-waits of %g us on CPU %d (the solves on CPU %d when it started)\n", inj.served, (double)inj.us, inj.helper_cpu, inj.solver_cpu));
  }
  PetscCall(VecDestroy(&u));
  PetscCall(VecDestroy(&b));
  PetscCall(MatDestroy(&A0));
  PetscCall(PetscFinalize());
  return 0;
}
