// aijp_warmup: the offline cache warm-up. Generates the benchmark matrices of the performance models on the
// GPU, times every format through the production executor (aijp::gpu_matrix with a forced format), fits
// every model and writes the coefficients into this GPU's cache file. Resumable: samples are appended to a
// state file next to the cache as they are measured, and a restarted run skips what is already there.
#include <aijpredict/warmup.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "tool_support.hpp"

const char* const aijp::bench::tool_name = "aijp_warmup";

namespace {

using aijp::bench::die;


const char* usage =
    "Usage: aijp_warmup [--quick | --full] [options]\n"
    "\n"
    "Fills this GPU's aijpredict coefficient cache: generates the benchmark matrices of the performance models\n"
    "on the GPU (constant row lengths on strip multiples for Guo-Wang; normal and uniform row lengths for\n"
    "Wang-Gu-Li; small, banded and random-column matrices for our own model), times every format through the\n"
    "same executor production uses (a forced plan), fits every model and writes the coefficients to the cache\n"
    "file of this GPU. Samples are appended to <cache>/<device>.samples.jsonl as they are measured; an\n"
    "interrupted run continues where it stopped.\n"
    "\n"
    "Options:\n"
    "  --quick           small grid, about 30 s on an H100/H200 (default)\n"
    "  --full            full grid, about 3 minutes\n"
    "  --cache-dir DIR   cache directory (default: $AIJPREDICT_CACHE_DIR, else $XDG_CACHE_HOME/aijpredict)\n"
    "  --restart         discard the samples of earlier runs of this GPU first\n"
    "  --formats LIST    only these formats (comma-separated; default all)\n"
    "  --no-fit          measure only; do not fit or write coefficients\n"
    "  --gated           time each batch queued behind a gate kernel, so the samples are the products' device\n"
    "                    time without the host's issue rate (samples in <device>.gated.samples.jsonl; the\n"
    "                    coefficients written then predict device time)\n"
    "  --help            this text\n";

void progress(size_t done, size_t total, double elapsed_s, const std::string& what)
{
  const int width = 30;
  const int fill = total ? static_cast<int>(width * done / total) : width;
  const double eta = done ? elapsed_s / done * (total - done) : 0;
  char bar[64];
  std::memset(bar, ' ', width);
  std::memset(bar, '#', fill);
  bar[width] = '\0';
  if (isatty(2)) {
    std::fprintf(stderr, "\r[%s] %zu/%zu  %5.1f s  ETA %4.0f s  %-60.60s", bar, done, total, elapsed_s, eta, what.c_str());
    if (done == total) std::fprintf(stderr, "\n");
  } else {
    std::fprintf(stderr, "[%s] %zu/%zu  %5.1f s  ETA %4.0f s  %s\n", bar, done, total, elapsed_s, eta, what.c_str());
  }
}

}  // namespace

int main(int argc, char** argv)
{
  aijp::warmup_options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << usage;
      return 0;
    } else if (a == "--quick") {
      o.full = false;
    } else if (a == "--full") {
      o.full = true;
    } else if (a == "--restart") {
      o.restart = true;
    } else if (a == "--gated") {
      o.gated = true;
    } else if (a == "--no-fit") {
      o.fit = false;
    } else if (a == "--cache-dir" && i + 1 < argc) {
      o.cache_dir = argv[++i];
    } else if (a == "--formats" && i + 1 < argc) {
      try {
        o.formats = aijp::parse_format_list(argv[++i]);
      } catch (const std::exception& e) {
        die(e.what());
      }
    } else {
      die("unknown or incomplete option '" + a + "' (see --help)");
    }
  }
  std::string why;
  if (!aijp::device_available(&why)) die(why + ": the warm-up needs a GPU");
  try {
    aijp::context_options co;
    co.cache_dir = o.cache_dir;
    aijp::context ctx(co);  // loads or measures the device constants (and writes them to the cache)
    for (const auto& w : ctx.warnings()) std::cerr << "aijp_warmup: " << w << "\n";
    std::fprintf(stderr, "aijp_warmup: %s grid on %s\n", o.full ? "full" : "quick", ctx.device().to_string().c_str());
    o.progress = progress;
    const auto r = aijp::run_warmup(ctx, o);
    std::fprintf(stderr, "aijp_warmup: %zu samples (%zu measured now) in %s\n", r.samples, r.measured_now, r.samples_file.c_str());
    if (r.launch_gap_us > 0)
      std::fprintf(stderr, "aijp_warmup: gap between back-to-back kernels %.3f us (median over the samples; fitted there)\n", r.launch_gap_us);
    for (const auto& l : r.lines) std::fprintf(stderr, "  %s\n", l.c_str());
    if (o.fit) std::fprintf(stderr, "aijp_warmup: wrote %s (%.1f s)\n", r.cache_file.c_str(), r.seconds);
  } catch (const std::exception& e) {
    die(e.what());
  }
  return 0;
}
