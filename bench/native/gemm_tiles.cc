// Every GEMM register tile (kernels::kGemmTileRows) on the projection GEMM of
// the benchmark's GEMM probe (rows x 512 x 512, in the tasks PackedLinear
// makes: 64 rows x 8 panels), one thread, the tiles interleaved round by round
// so that other load on the machine falls on all of them alike. Built natively
// (CMake, best Highway target) and for WebAssembly (bench/README.md). Prints
// one JSON line per tile: {"tile":"4x2v","gflops":<median>,"chosen":bool,...},
// GFLOP/s per second of this thread's CPU time (a busy machine takes turns on
// the cores; CPU time counts only ours).
// Usage: gemm_tiles [rounds=15] [rows=1024] [n=512] [k=512] [target=SSE4]
// (target: natively, a lesser Highway target than the CPU's best).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "hwy/targets.h"
#include "src/kernels/kernels.h"

#ifdef __EMSCRIPTEN__
#include <emscripten.h>
// Node's CPU time of the process (one thread runs here).
EM_JS(double, CpuSeconds, (), {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
});
#else
#include <time.h>
double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
#endif

namespace {

using mha::kernels::kGemmTileRows;

// PackedLinear's task shape (src/attention/linear.cc).
constexpr size_t kRowBlock = 64, kPanelsPerBlock = 8;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

size_t Arg(int argc, char** argv, const char* name, size_t fallback) {
  const size_t len = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], name, len) == 0 && argv[i][len] == '=') {
      return std::strtoul(argv[i] + len + 1, nullptr, 10);
    }
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  namespace k = mha::kernels;
  const size_t rounds = Arg(argc, argv, "rounds", 15), rows = Arg(argc, argv, "rows", 1024);
  const size_t kN = Arg(argc, argv, "n", 512), kK = Arg(argc, argv, "k", 512);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "target=", 7) != 0) continue;
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      if (std::strcmp(hwy::TargetName(target), argv[i] + 7) == 0) {
        hwy::SetSupportedTargetsForTest(target);
      }
    }
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(rows * kK), b(kN * kK), bias(kN), c(rows * kN);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  for (float& x : bias) x = dist(rng);
  const k::PanelLayout layout = k::GemmLayout(k::WeightType::kFloat32, kK);
  std::vector<float> packed_floats(layout.Bytes(kN) / sizeof(float));
  uint8_t* packed = reinterpret_cast<uint8_t*>(packed_floats.data());
  k::PackRows(layout, b.data(), kK, 0, kN, packed);
  k::PackBias(layout, bias.data(), 0, kN, packed);
  const size_t col_step = k::GemmPanelWidth() * kPanelsPerBlock;
  const size_t chosen = k::GemmTileRows();
  auto gemm = [&](size_t tile_rows) {
    k::SetGemmTileRows(tile_rows);
    for (size_t r0 = 0; r0 < rows; r0 += kRowBlock) {
      const k::GemmPlan plan = k::PlanGemm(layout, std::min(kRowBlock, rows - r0));
      for (size_t c0 = 0; c0 < kN; c0 += col_step) {
        k::GemmTile(plan, a.data(), kK, packed, kN, c.data(), kN, r0, c0,
                    std::min(c0 + col_step, kN), nullptr);
      }
    }
  };
  const size_t tiles = std::size(kGemmTileRows);
  std::vector<std::vector<double>> gflops(tiles);
  for (size_t t = 0; t < tiles; ++t) gemm(kGemmTileRows[t]);  // warm-up
  const double flops = 2.0 * rows * kN * kK;
  for (size_t round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < tiles; ++i) {
      const size_t t = (round + i) % tiles;  // each tile leads in turn
      const double start = CpuSeconds();
      gemm(kGemmTileRows[t]);
      gflops[t].push_back(flops / (CpuSeconds() - start) * 1e-9);
    }
  }
  for (size_t t = 0; t < tiles; ++t) {
    std::printf("{\"tile\":\"%s\",\"gflops\":%.2f,\"min\":%.2f,\"max\":%.2f,\"chosen\":%s,"
                "\"target\":\"%s\"}\n",
                k::GemmTileName(kGemmTileRows[t]), Median(gflops[t]),
                *std::min_element(gflops[t].begin(), gflops[t].end()),
                *std::max_element(gflops[t].begin(), gflops[t].end()),
                kGemmTileRows[t] == chosen ? "true" : "false", k::TargetName());
  }
  return 0;
}
