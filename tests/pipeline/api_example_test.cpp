// The usage example at the top of include/stepmix/model.hpp, line for line
// (only the model path and the output folder differ), so that it stays true:
// it compiles, runs the embedded model's schedule and writes its picture.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "common/temp_dir.hpp"
#include "stepmix/model.hpp"

namespace stepmix {
namespace {

class ApiExample : public test::TempDirTest {};

TEST_F(ApiExample, TheHeaderExampleRunsAndWritesItsPicture) {
  const std::string model_dir = std::string(STEPMIX_MODELS_DIR) + "/fashion-cosmos3-fp8";
  const std::string out = (dir_ / "boot.png").string();
  int steps_seen = 0;

  stepmix::Model model = stepmix::Model::open(model_dir);
  stepmix::GenerateRequest request;
  request.prompt = "ankle boot";
  request.seed = 7;
  // The outputs are declared and checked before anything is sampled.
  stepmix::GenerationOutputs outputs(model, model.plan(request), {.out = out});
  stepmix::GenerateCallbacks callbacks;
  callbacks.on_step_begin = [&](const stepmix::StepEvent& e) {
    std::printf("step %d/%d %s\n", e.step + 1, e.num_steps,
                std::string(stepmix::precision_trace_token(e.generation)).c_str());
    ++steps_seen;
  };
  stepmix::GenerateResult result = model.generate(request, callbacks);
  std::printf("%s\n", stepmix::trace_string(result.trace).c_str());  // W8A16x3 / W8A8x2 / W8A16x3
  outputs.write(result, {.prompt = "ankle boot", .seed = 7, .model = model_dir});

  EXPECT_EQ(stepmix::trace_string(result.trace), "W8A16x3 / W8A8x2 / W8A16x3");
  EXPECT_EQ(steps_seen, 8);
  ASSERT_TRUE(std::filesystem::exists(out));
  EXPECT_GT(std::filesystem::file_size(out), 8u);
}

}  // namespace
}  // namespace stepmix
