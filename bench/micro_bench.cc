// Micro-benchmarks of the per-trial hot path: parsing a metric line, asking a sampler for a
// point, and committing a measurement to the store.
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "orchestrator/core/store.h"
#include "strategies/sampler.h"
#include "common/metric_parser.h"

namespace sextant {
namespace {

void BM_ParseMetricLine(benchmark::State& state) {
  const std::string line = "epoch=3 val_loss=0.412 accuracy=0.871 lr=1e-3 note: fine";
  for (auto _ : state) benchmark::DoNotOptimize(ParseMetricLine(line));
  state.SetBytesProcessed(state.iterations() * line.size());
}
BENCHMARK(BM_ParseMetricLine);

SearchSpace TenFloats() {
  SearchSpace space;
  for (int i = 0; i < 10; ++i) {
    ParamSpec p;
    p.name = absl::StrCat("x", i);
    space.params.push_back(std::move(p));
  }
  return space;
}

void BM_SobolAsk(benchmark::State& state) {
  auto sampler = NewSobolSampler(TenFloats(), 1);
  int64_t n = 0;
  for (auto _ : state) benchmark::DoNotOptimize(sampler->Ask(SampleRequest{n++, {}}));
}
BENCHMARK(BM_SobolAsk);

void BM_RandomAsk(benchmark::State& state) {
  auto sampler = NewRandomSampler(TenFloats(), 1);
  int64_t n = 0;
  for (auto _ : state) benchmark::DoNotOptimize(sampler->Ask(SampleRequest{n++, {}}));
}
BENCHMARK(BM_RandomAsk);

// One durable commit (WAL fsync) holding one measurement: the store's cost per report.
void BM_StoreCommitMeasurement(benchmark::State& state) {
  char dir[] = "/tmp/sextant-bench-XXXXXX";
  if (!mkdtemp(dir)) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  auto store = *Store::Open(std::string(dir) + "/state.db", true);
  int64_t seq = 0;
  for (auto _ : state) {
    (void)store->Begin();
    (void)store->AddMeasurement(MeasurementRow{1, 1, ++seq, 0.1, R"({"loss":1})"});
    (void)store->Commit();
  }
  store.reset();
  std::string cmd = absl::StrCat("rm -rf ", dir);
  if (std::system(cmd.c_str()) != 0) state.SkipWithError("cleanup failed");
}
BENCHMARK(BM_StoreCommitMeasurement)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace sextant
