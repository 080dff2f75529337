// Experiment (host only): what handing a task to another thread costs the thread that hands it over.
//
// A staged step with plan_options::host_worker hands its stages to detail::step_worker in one part on the
// products' thread; on the H100 machine (KVM guest) that part took 15-36 us inside a ~1 ms short solve
// (bench/results/2026-11-25_h100_session28_trace.txt). This tool separates what the hand-over does:
//   wake:   queue a task under a mutex and notify_one a worker asleep in condition_variable::wait (a futex
//           wake; in a virtual machine an idle virtual CPU is woken by an inter-processor interrupt);
//   polled: queue the same task without a notification while the worker polls the queue with a sleep of
//           --poll-us between looks (the worker pays its timer wake-ups; the caller only takes the mutex);
//   build:  only what the hand-over builds before it queues (a std::function and a shared promise);
//   hostfn: queue without a notification and have the CUDA driver's callback thread notify the worker
//           (cudaLaunchHostFunc on a stream of its own): the caller pays one CUDA call instead of the wake.
// The caller spins --gap-us between hand-overs (the solver's work between two products), so the worker is
// back asleep (wake) or polling (polled) each time. Each mode's caller-side host time: median, p90, max.
// Usage: aijp_wake_cost [--trials N] [--gap-us G] [--poll-us P] [--caller-cpu A] [--worker-cpu B]
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#if defined(__linux__)
#include <sched.h>
#endif

namespace {

using clock_type = std::chrono::steady_clock;

double us_since(clock_type::time_point t0)
{
  return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

void spin_us(double us)
{
  const auto t0 = clock_type::now();
  while (us_since(t0) < us) {
  }
}

struct worker {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool polling = false;  // guarded by mu: the worker looks every poll_us instead of waiting for a notify
  bool stop = false;
  double poll_us = 50;
  std::thread thread;

  explicit worker(int cpu)
  {
    thread = std::thread([this, cpu] {
#if defined(__linux__)
      if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        (void)sched_setaffinity(0, sizeof(set), &set);
      }
#else
      (void)cpu;
#endif
      for (;;) {
        std::function<void()> task;
        {
          std::unique_lock<std::mutex> lock(mu);
          while (queue.empty() && !stop) {
            if (polling) {
              lock.unlock();
              std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(poll_us));
              lock.lock();
            } else {
              cv.wait(lock);
            }
          }
          if (stop && queue.empty()) return;
          task = std::move(queue.front());
          queue.pop_front();
        }
        task();
      }
    });
  }
  ~worker()
  {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_one();
    thread.join();
  }
  void set_polling(bool on)
  {
    {
      std::lock_guard<std::mutex> lock(mu);
      polling = on;
    }
    cv.notify_one();
  }
  // Queues `task`; notifies only a worker that waits for a notification, unless `notify` is false.
  void submit(std::function<void()> task, bool notify = true)
  {
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(std::move(task));
      wake = !polling && notify;
    }
    if (wake) cv.notify_one();
  }
  static void CUDART_CB notify_from_driver(void* self) { static_cast<worker*>(self)->cv.notify_one(); }
};

struct summary {
  double median, p90, max;
};

summary summarize(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) { return v[static_cast<std::size_t>(q * (v.size() - 1) + 0.5)]; };
  return {at(0.5), at(0.9), v.back()};
}

}  // namespace

int main(int argc, char** argv)
{
  int trials = 2000, worker_cpu = -1, caller_cpu = -1;
  double gap_us = 100, poll_us = 50;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "aijp_wake_cost: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::printf("Usage: aijp_wake_cost [--trials N] [--gap-us G] [--poll-us P] [--caller-cpu A] [--worker-cpu B]\n"
                  "Caller-side host time of handing a task to a worker thread: notify a sleeping worker (wake),\n"
                  "queue for a polling worker (polled), or only build the task (build). -1 CPUs: not pinned.\n");
      return 0;
    } else if (a == "--trials") trials = std::atoi(value());
    else if (a == "--gap-us") gap_us = std::atof(value());
    else if (a == "--poll-us") poll_us = std::atof(value());
    else if (a == "--worker-cpu") worker_cpu = std::atoi(value());
    else if (a == "--caller-cpu") caller_cpu = std::atoi(value());
    else {
      std::fprintf(stderr, "aijp_wake_cost: unknown argument '%s' (--help)\n", a.c_str());
      return 2;
    }
  }
  if (trials < 10 || gap_us < 0 || poll_us <= 0) {
    std::fprintf(stderr, "aijp_wake_cost: need --trials >= 10, --gap-us >= 0, --poll-us > 0\n");
    return 2;
  }
#if defined(__linux__)
  if (caller_cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(caller_cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) std::fprintf(stderr, "aijp_wake_cost: cannot pin the caller to CPU %d\n", caller_cpu);
  }
  std::printf("caller on CPU %d, worker pinned to %d (-1: the scheduler), %d trials, gap %.0f us, poll %.0f us\n",
              sched_getcpu(), worker_cpu, trials, gap_us, poll_us);
#endif
  worker w(worker_cpu);
  w.poll_us = poll_us;
  std::atomic<long> ran{0};
  cudaStream_t side = nullptr;
  if (cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) != cudaSuccess) {
    std::fprintf(stderr, "aijp_wake_cost: no CUDA device: the hostfn mode is left out\n");
    side = nullptr;
  }
  const int nmodes = side ? 4 : 3;
  const char* modes[] = {"wake", "polled", "build", "hostfn"};
  std::vector<std::vector<double>> t(4);
  // Interleaved: each round takes every mode once, so a disturbance of the machine hits all alike.
  for (int k = 0; k < trials; ++k) {
    for (int m = 0; m < nmodes; ++m) {
      w.set_polling(m == 1);
      spin_us(gap_us);  // the worker is asleep again (wake) or polling (polled)
      const auto t0 = clock_type::now();
      auto done = std::make_shared<std::promise<void>>();
      std::function<void()> task = [done, &ran] {
        ran.fetch_add(1, std::memory_order_relaxed);
        done->set_value();
      };
      auto fut = done->get_future();
      if (m == 2) {
        t[m].push_back(us_since(t0));
        task();
      } else if (m == 3) {
        w.submit(std::move(task), false);
        if (cudaLaunchHostFunc(side, worker::notify_from_driver, &w) != cudaSuccess) {
          std::fprintf(stderr, "aijp_wake_cost: cudaLaunchHostFunc failed\n");
          return 1;
        }
        t[m].push_back(us_since(t0));
      } else {
        w.submit(std::move(task));
        t[m].push_back(us_since(t0));
      }
      fut.wait();  // the worker ran it (outside the timed part)
    }
  }
  std::printf("%-8s %10s %10s %10s   caller-side host time (us)\n", "mode", "median", "p90", "max");
  for (int m = 0; m < nmodes; ++m) {
    const summary s = summarize(t[m]);
    std::printf("%-8s %10.2f %10.2f %10.2f\n", modes[m], s.median, s.p90, s.max);
  }
  std::printf("tasks run: %ld of %d\n", ran.load(), nmodes * trials);
  if (side) (void)cudaStreamDestroy(side);
  return ran.load() == static_cast<long>(nmodes) * trials ? 0 : 1;
}
