// Tokenizer throughput and caption latency, single-threaded (one encode at a
// time on the calling thread), run by bench/run-tokenizer.sh against the
// JavaScript reference (bench/tokenizer_peer.mjs) on the same input.
//
// usage: bench_tokenizer TOKENIZER_DIR TEXT_JSONL CAPTION_TXT [ROUNDS]
// Prints one JSON object: load time, per-round encode time of all chunks
// (round 1 starts with an empty word cache), MB/s of the best round, the
// caption's first and median encode time, CPU seconds per round, and a checksum of every id so the
// two sides can be seen to agree.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "text/prompt_model.hpp"
#include "text/tokenizer.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
// CPU time of the whole process, as the peer's process.cpuUsage() counts it:
// robust to other processes on a shared machine.
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// The same checksum as the peer: h = (31 h + id) mod (2^31 - 1) over all ids.
void mix(uint64_t& h, const std::vector<int64_t>& ids) {
  for (int64_t id : ids) h = (h * 31 + uint64_t(id)) % 2147483647ull;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s TOKENIZER_DIR TEXT_JSONL CAPTION_TXT [ROUNDS]\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 4 ? std::atoi(argv[4]) : 3;
  std::vector<std::string> chunks;
  std::size_t bytes = 0;
  {
    std::ifstream in(argv[2]);
    std::string line;
    while (std::getline(in, line)) {
      chunks.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
      bytes += chunks.back().size();
    }
  }
  std::ifstream caption_file(argv[3], std::ios::binary);
  const std::string caption((std::istreambuf_iterator<char>(caption_file)), {});

  const auto t_load = Clock::now();
  const auto tok = stepmix::text::Tokenizer::from_file(stepmix::text::locate_tokenizer(argv[1]).tokenizer_json);
  const double load_s = seconds_since(t_load);

  // The caption first, on a fresh tokenizer: its first call fills the cache.
  const auto t_first = Clock::now();
  const std::size_t caption_ids = tok.encode(caption).size();
  const double caption_first_s = seconds_since(t_first);
  std::vector<double> caption_times;
  for (int i = 0; i < 200; ++i) {
    const auto t = Clock::now();
    tok.encode(caption);
    caption_times.push_back(seconds_since(t));
  }
  std::sort(caption_times.begin(), caption_times.end());

  const auto fresh = stepmix::text::Tokenizer::from_file(stepmix::text::locate_tokenizer(argv[1]).tokenizer_json);
  std::vector<double> round_s, round_cpu_s;
  uint64_t checksum = 0, ids = 0;
  for (int r = 0; r < rounds; ++r) {
    uint64_t h = 0, n = 0;
    const double cpu = cpu_seconds();
    const auto t = Clock::now();
    for (const std::string& c : chunks) {
      const auto v = fresh.encode(c);
      mix(h, v);
      n += v.size();
    }
    round_s.push_back(seconds_since(t));
    round_cpu_s.push_back(cpu_seconds() - cpu);
    checksum = h;
    ids = n;
  }
  const double best = *std::min_element(round_s.begin(), round_s.end());
  const double best_cpu = *std::min_element(round_cpu_s.begin(), round_cpu_s.end());
  nlohmann::json out = {{"impl", "stepmix"},
                        {"bytes", bytes},
                        {"chunks", chunks.size()},
                        {"ids", ids},
                        {"checksum", checksum},
                        {"load_s", load_s},
                        {"round_s", round_s},
                        {"mb_per_s_first_round", bytes / round_s.front() / 1e6},
                        {"mb_per_s", bytes / best / 1e6},
                        {"round_cpu_s", round_cpu_s},
                        {"mb_per_cpu_s", bytes / best_cpu / 1e6},
                        {"caption_bytes", caption.size()},
                        {"caption_ids", caption_ids},
                        {"caption_first_ms", caption_first_s * 1e3},
                        {"caption_median_ms", caption_times[caption_times.size() / 2] * 1e3}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
