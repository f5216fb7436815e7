// Model::plan is const, so several threads may plan on one model at once,
// the first text prompt (which loads the tokenizer) among them: they get the
// same plan, and the load happens once (under PromptEncoder's lock).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "stepmix/model.hpp"

namespace stepmix {
namespace {

const std::string kFashion = std::string(STEPMIX_MODELS_DIR) + "/fashion-cosmos3-fp8";

TEST(ConcurrentPlan, ThreadsPlanningOnAFreshModelGetTheSamePlan) {
  constexpr int kThreads = 8;
  for (int round = 0; round < 10; ++round) {
    const Model model = Model::open(kFashion);  // a fresh model: no tokenizer loaded yet
    GenerateRequest r;
    r.prompt = "a photo of an ankle boot";
    r.steps = 4;
    std::vector<std::vector<int64_t>> cond(kThreads), uncond(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        const GeneratePlan p = model.plan(r);
        cond[t] = p.cond_ids;
        uncond[t] = p.uncond_ids;
      });
    for (std::thread& t : threads) t.join();
    ASSERT_FALSE(cond[0].empty());
    for (int t = 1; t < kThreads; ++t) {
      EXPECT_EQ(cond[t], cond[0]) << "round " << round << ", thread " << t;
      EXPECT_EQ(uncond[t], uncond[0]) << "round " << round << ", thread " << t;
    }
  }
}

}  // namespace
}  // namespace stepmix
