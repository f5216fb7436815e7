// scheduler_config.json parsing: the golden configs load, every unsupported
// value is rejected with "<file>: <field>: expected ..., got ...", overrides.
#include "sched/config.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error_of.hpp"
#include "sched/fp_contract.hpp"  // expected values are computed with the reference roundings
#include "sched_test_util.hpp"
#include "stepmix/error.hpp"

namespace stepmix::sched {
namespace {

using nlohmann::json;

json golden_json(const std::string& name) {
  std::ifstream in(stepmix::test::golden_path("scheduler/" + name));
  return json::parse(in);
}

// `config` after the override the Cosmos3 pipeline applies: Karras off.
SchedulerConfig karras_turned_off(SchedulerConfig config) {
  SchedulerOverrides off;
  off.use_karras_sigmas = false;
  apply_overrides(config, off);
  return config;
}

// The error text for `j`, or "" if it parsed.
std::string parse_error(const json& j) {
  try {
    parse_scheduler_config(j, "cfg.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SchedulerConfigLoad, GoldenConfigs) {
  const SchedulerConfig s10 = load_scheduler_config(stepmix::test::golden_path("scheduler/unipc_flowshift10.json"));
  EXPECT_EQ(s10.kind, SchedulerKind::unipc_multistep);
  EXPECT_EQ(s10.unipc.flow_shift, 10.0);
  EXPECT_EQ(s10.unipc.solver_order, 2);
  EXPECT_FALSE(s10.unipc.use_karras_sigmas);
  EXPECT_TRUE(s10.notes.empty());

  const SchedulerConfig ck =
      load_scheduler_config(stepmix::test::golden_path("scheduler/unipc_checkpoint_default.json"));
  EXPECT_TRUE(ck.unipc.use_karras_sigmas);
  EXPECT_EQ(ck.unipc.sigma_min, 0.147);
  EXPECT_EQ(ck.unipc.sigma_max, 200.0);
  // The grid is said once overrides are known (the pipeline may turn it off).
  EXPECT_TRUE(ck.notes.empty());
  SchedulerConfig kept = ck;
  apply_overrides(kept, SchedulerOverrides{});
  ASSERT_EQ(kept.notes.size(), 1u);
  EXPECT_NE(kept.notes[0].find("UniPC uses Karras flow sigmas"), std::string::npos);
  const SchedulerConfig off = karras_turned_off(ck);
  ASSERT_EQ(off.notes.size(), 1u);
  EXPECT_NE(off.notes[0].find("use_karras_sigmas true is turned off"), std::string::npos) << off.notes[0];

  const SchedulerConfig fm = load_scheduler_config(stepmix::test::golden_path("scheduler/flowmatch_euler_shift3.json"));
  EXPECT_EQ(fm.kind, SchedulerKind::flow_match_euler);
  EXPECT_EQ(fm.flow_match.shift, 3.0);
  EXPECT_FALSE(fm.flow_match.stochastic_sampling);
  EXPECT_TRUE(fm.flow_match.explicit_sigmas.empty());
  EXPECT_EQ(make_scheduler(fm)->name(), "FlowMatchEulerDiscreteScheduler");
}

TEST(SchedulerConfigLoad, FileErrors) {
  EXPECT_THROW(load_scheduler_config("/nonexistent/scheduler_config.json"), Error);
  const auto path = std::filesystem::temp_directory_path() / "stepmix_sched_bad.json";
  std::ofstream(path) << "{\"_class_name\": ";
  try {
    load_scheduler_config(path.string());
    FAIL() << "invalid JSON accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
  EXPECT_NE(parse_error(json::array()), "");
}

TEST(SchedulerConfigLoad, DeeplyNestedFileIsRejected) {
  // Copying or quoting a value nested this deep used to overflow the stack.
  const auto path = std::filesystem::temp_directory_path() / ("stepmix_sched_deep_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << R"({"_class_name": "UniPCMultistepScheduler", "prediction_type": )" << std::string(100000, '[')
                      << std::string(100000, ']') << "}";
  try {
    load_scheduler_config(path.string());
    ADD_FAILURE() << "deeply nested JSON accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path.string() + ": JSON nested deeper than 64 levels"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(path);
  EXPECT_THROW(load_scheduler_config("/dev/zero"), Error);  // not a regular file: refused, not read
}

TEST(SchedulerConfigLoad, NumberOutsideTheDoubleRangeIsAClearError) {
  // nlohmann throws out_of_range (not parse_error) for 1e400.
  const auto path = std::filesystem::temp_directory_path() / ("stepmix_sched_1e400_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << R"({"_class_name": "FlowMatchEulerDiscreteScheduler", "shift": 1e400})";
  try {
    load_scheduler_config(path.string());
    ADD_FAILURE() << "1e400 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path.string() + ": not valid JSON"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

struct Rejection {
  std::string field;
  json value;
  std::string expected;  // fragment of the "expected ..." text
};

class UniPCRejections : public ::testing::TestWithParam<Rejection> {};

TEST_P(UniPCRejections, ClearError) {
  const Rejection& r = GetParam();
  json j = golden_json("unipc_flowshift10.json");
  j[r.field] = r.value;
  const std::string err = parse_error(j);
  const std::string prefix = "[scheduler] cfg.json: " + r.field + ": expected ";
  EXPECT_EQ(err.rfind(prefix, 0), 0u) << err;
  EXPECT_NE(err.find(r.expected), std::string::npos) << err;
  EXPECT_NE(err.find(", got " + r.value.dump()), std::string::npos) << err;
}

INSTANTIATE_TEST_SUITE_P(
    Fields, UniPCRejections,
    ::testing::Values(Rejection{"prediction_type", "epsilon", "\"flow_prediction\""},
                      Rejection{"prediction_type", "v_prediction", "\"flow_prediction\""},
                      Rejection{"use_flow_sigmas", false, "true"}, Rejection{"solver_type", "bh1", "\"bh2\""},
                      Rejection{"solver_type", "bh3", "\"bh2\", \"midpoint\", \"heun\" or \"logrho\" (bh1 is not"},
                      Rejection{"predict_x0", false, "true"}, Rejection{"thresholding", true, "false"},
                      Rejection{"use_dynamic_shifting", true, "false"}, Rejection{"shift_terminal", 0.1, "null"},
                      Rejection{"use_exponential_sigmas", true, "false"}, Rejection{"use_beta_sigmas", true, "false"},
                      Rejection{"rescale_betas_zero_snr", "yes", "true or false"},
                      Rejection{"beta_schedule", "foo", "\"linear\", \"scaled_linear\" or \"squaredcos_cap_v2\""},
                      Rejection{"lower_order_final", false, "true (with final sigma 0"},
                      Rejection{"final_sigmas_type", "sigma_min", "\"zero\""}, Rejection{"solver_order", 3, "1 or 2"},
                      Rejection{"solver_order", 2.5, "1 or 2"},
                      // Out of int64's range: quoted as written, not wrapped negative.
                      Rejection{"solver_order", 10000000000000000000ull, "1 or 2"},
                      Rejection{"num_train_timesteps", 18446744073709551615ull, "a positive integer"},
                      Rejection{"disable_corrector", json::array({0.5}), "a list of step indices"},
                      Rejection{"disable_corrector", 1, "a list of step indices"},
                      // Diffusers' first corrector step fails on null.
                      Rejection{"disable_corrector", nullptr, "a list of step indices"},
                      Rejection{"trained_betas", json::array({"a"}), "null or a list of numbers"},
                      Rejection{"solver_p", json::object(), "null"}, Rejection{"flow_shift", -1.0, "a positive number"},
                      Rejection{"flow_shift", 1e308, "a positive number in [0.01, 1000]"},
                      Rejection{"flow_shift", 1e-300, "a positive number in [0.01, 1000]"},
                      Rejection{"num_train_timesteps", 1, "a positive integer in [2, 1000000]"},
                      Rejection{"flow_shift", "10", "a finite number"},
                      Rejection{"num_train_timesteps", 0, "a positive integer"},
                      Rejection{"timestep_spacing", "karras", "\"linspace\", \"leading\" or \"trailing\""},
                      Rejection{"use_karras_sigmas", "yes", "true or false"}, Rejection{"beta_start", "x", "a number"},
                      Rejection{"mystery_option", 1, "no such field"}),
    [](const auto& info) { return info.param.field + "_" + std::to_string(info.index); });

TEST(SchedulerConfigParse, ClassNameAndDefaults) {
  json j = golden_json("unipc_flowshift10.json");
  j["_class_name"] = "DPMSolverMultistepScheduler";
  EXPECT_NE(parse_error(j).find("_class_name: expected \"UniPCMultistepScheduler\" or "
                                "\"FlowMatchEulerDiscreteScheduler\", got \"DPMSolverMultistepScheduler\""),
            std::string::npos);
  j.erase("_class_name");
  EXPECT_NE(parse_error(j).find("_class_name: expected"), std::string::npos);

  // Absent fields take the Diffusers defaults, and the message says so.
  json minimal = {{"_class_name", "UniPCMultistepScheduler"}, {"use_flow_sigmas", true}};
  EXPECT_NE(parse_error(minimal).find("prediction_type: expected \"flow_prediction\" (the model predicts a "
                                      "velocity), got \"epsilon\" (Diffusers default; field absent)"),
            std::string::npos)
      << parse_error(minimal);
  minimal["prediction_type"] = "flow_prediction";
  EXPECT_EQ(parse_error(minimal), "");
  const SchedulerConfig cfg = parse_scheduler_config(minimal, "min.json");
  EXPECT_EQ(cfg.unipc.flow_shift, 1.0);
  EXPECT_EQ(cfg.unipc.solver_order, 2);

  // What Diffusers runs exactly as an accepted setting is taken: the solver
  // names its constructor maps to bh2 (with a note), lower_order_final with
  // order 1, the beta tables' settings (unused with flow sigmas), a
  // beta_schedule name beside an explicit table.
  for (const char* name : {"midpoint", "heun", "logrho"}) {
    json alias = golden_json("unipc_flowshift10.json");
    alias["solver_type"] = name;
    const SchedulerConfig c = parse_scheduler_config(alias, "cfg.json");
    ASSERT_EQ(c.notes.size(), 1u) << name;
    EXPECT_EQ(c.notes[0], "cfg.json: solver_type \"" + std::string(name) + "\" runs as bh2, as Diffusers runs it");
  }
  json order1 = golden_json("unipc_flowshift10.json");
  order1["solver_order"] = 1;
  order1["lower_order_final"] = false;
  order1["rescale_betas_zero_snr"] = true;
  order1["trained_betas"] = json::array({0.1, 0.2});
  order1["beta_schedule"] = "custom";
  EXPECT_EQ(parse_error(order1), "");

  // Metadata fields are ignored.
  json j2 = golden_json("unipc_flowshift3.json");
  j2["_name_or_path"] = "somewhere";
  EXPECT_EQ(parse_error(j2), "");
}

// A file asking for Karras sigmas parses whatever its shift and bounds: the
// Cosmos3 pipeline turns Karras off. Kept on, they must be usable.
TEST(SchedulerConfigParse, KarrasNeedsBoundsAndNoShiftOnlyWhenItStaysOn) {
  const auto error_kept_on = [](const json& j) {
    SchedulerConfig cfg = parse_scheduler_config(j, "cfg.json");
    try {
      apply_overrides(cfg, SchedulerOverrides{});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const auto runs_with_karras_off = [](const json& j) {
    SchedulerConfig cfg = parse_scheduler_config(j, "cfg.json");
    SchedulerOverrides off;
    off.use_karras_sigmas = false;
    apply_overrides(cfg, off);
    return make_scheduler(cfg) != nullptr;
  };
  json j = golden_json("unipc_checkpoint_default.json");
  j["flow_shift"] = 10.0;
  EXPECT_NE(error_kept_on(j).find("flow_shift 10.000000 with Karras sigmas (cfg.json)"), std::string::npos)
      << error_kept_on(j);
  EXPECT_TRUE(runs_with_karras_off(j));
  j = golden_json("unipc_checkpoint_default.json");
  j["sigma_min"] = nullptr;
  EXPECT_NE(error_kept_on(j).find("cfg.json: sigma_min, sigma_max: expected 0 < sigma_min < sigma_max"),
            std::string::npos)
      << error_kept_on(j);
  EXPECT_TRUE(runs_with_karras_off(j));
  j = golden_json("unipc_checkpoint_default.json");
  j["sigma_max"] = 0.1;
  EXPECT_NE(error_kept_on(j).find("expected 0 < sigma_min < sigma_max"), std::string::npos);
  // make_scheduler checks too, for a configuration that skipped the overrides.
  SchedulerConfig raw = parse_scheduler_config(j, "cfg.json");
  EXPECT_THROW(make_scheduler(raw), Error);
}

json distilled_json() {  // docs/schedulers.md §9
  return {{"_class_name", "FlowMatchEulerDiscreteScheduler"},
          {"num_train_timesteps", 1000},
          {"shift", 1.0},
          {"stochastic_sampling", true},
          {"use_karras_sigmas", false},
          {"use_dynamic_shifting", false},
          {"fixed_step_requires_explicit_sigmas", true},
          {"fixed_step_sampler_config",
           {{"sample_type", "sde"}, {"t_list", {1.0, 0.9375, 0.8333333333333334, 0.625}}}}};
}

TEST(SchedulerConfigParse, DistilledFlowMatch) {
  const SchedulerConfig cfg = parse_scheduler_config(distilled_json(), "distilled.json");
  EXPECT_TRUE(cfg.flow_match.stochastic_sampling);
  EXPECT_EQ(cfg.flow_match.explicit_sigmas, (std::vector<double>{1.0, 0.9375, 0.8333333333333334, 0.625}));
  auto s = make_scheduler(cfg);
  s->set_timesteps(4);
  EXPECT_EQ(s->timesteps(), (std::vector<double>{1000.0, 937.5, double(833.3333f), 625.0}));
  EXPECT_THROW(s->set_timesteps(8), Error);

  json j = distilled_json();
  j["fixed_step_sampler_config"]["sample_type"] = "ode";
  EXPECT_NE(parse_error(j).find("fixed_step_sampler_config.sample_type: expected \"sde\", got \"ode\""),
            std::string::npos);
  j = distilled_json();
  j["stochastic_sampling"] = false;
  EXPECT_NE(parse_error(j).find("stochastic_sampling: expected true when"), std::string::npos);
  j = distilled_json();
  j["fixed_step_sampler_config"]["t_list"] = {1.0, 1.0};
  EXPECT_NE(parse_error(j).find("t_list: expected a non-empty, strictly decreasing list"), std::string::npos);
  j = distilled_json();
  j["fixed_step_sampler_config"]["extra"] = 1;
  EXPECT_NE(parse_error(j).find("fixed_step_sampler_config.extra: expected no such field"), std::string::npos);
  j = distilled_json();
  j.erase("fixed_step_sampler_config");
  EXPECT_NE(parse_error(j).find("fixed_step_sampler_config: expected an object"), std::string::npos);
  j = distilled_json();
  j["fixed_step_requires_explicit_sigmas"] = false;
  const SchedulerConfig loose = parse_scheduler_config(j, "d.json");
  EXPECT_TRUE(loose.flow_match.explicit_sigmas.empty());
  EXPECT_EQ(loose.notes.size(), 1u);
}

TEST(SchedulerConfigParse, FlowMatchRejections) {
  for (const auto& [field, value] : std::vector<std::pair<std::string, json>>{{"use_dynamic_shifting", true},
                                                                              {"invert_sigmas", true},
                                                                              {"use_exponential_sigmas", true},
                                                                              {"use_beta_sigmas", true},
                                                                              {"shift_terminal", 0.5},
                                                                              {"shift", 0.0},
                                                                              {"shift", 1e308},
                                                                              {"flow_shift", 3.0}}) {
    json j = golden_json("flowmatch_euler_shift3.json");
    j[field] = value;
    const std::string err = parse_error(j);
    EXPECT_EQ(err.rfind("[scheduler] cfg.json: " + field + ": expected ", 0), 0u) << field << ": " << err;
  }
}

// Karras sigmas are not implemented for FlowMatch Euler: a file asking for
// them is refused when a scheduler is made, unless the override the Cosmos3
// pipeline applies (Karras off, for either scheduler) turned them off, which
// a note says.
TEST(SchedulerOverrides, FlowMatchKarrasIsTurnedOffByThePipelineOverride) {
  json j = golden_json("flowmatch_euler_shift3.json");
  j["use_karras_sigmas"] = true;
  const SchedulerConfig parsed = parse_scheduler_config(j, "cfg.json");
  EXPECT_TRUE(parsed.flow_match.use_karras_sigmas);
  const std::string refused = stepmix::test::error_of([&] { make_scheduler(parsed); });
  EXPECT_NE(refused.find("cfg.json: use_karras_sigmas true: Karras sigmas are implemented for UniPC only"),
            std::string::npos)
      << refused;
  SchedulerConfig off = karras_turned_off(parsed);
  ASSERT_EQ(off.notes.size(), 1u);
  EXPECT_NE(off.notes[0].find("cfg.json: use_karras_sigmas true is turned off"), std::string::npos) << off.notes[0];
  auto turned_off = make_scheduler(off);
  auto plain = make_scheduler(parse_scheduler_config(golden_json("flowmatch_euler_shift3.json"), "cfg.json"));
  turned_off->set_timesteps(4);
  plain->set_timesteps(4);
  EXPECT_EQ(turned_off->timesteps(), plain->timesteps());
  SchedulerOverrides karras_on;
  karras_on.use_karras_sigmas = true;
  EXPECT_NE(stepmix::test::error_of([&] { apply_overrides(off, karras_on); }).find("only UniPC supports Karras sigmas"),
            std::string::npos);
}

TEST(SchedulerOverrides, NativeFlowGridIsUniPCOnly) {
  SchedulerConfig s10 = load_scheduler_config(stepmix::test::golden_path("scheduler/unipc_flowshift10.json"));
  SchedulerOverrides native;
  native.native_flow_grid = true;
  apply_overrides(s10, native);
  EXPECT_TRUE(s10.unipc.native_flow_grid);
  auto s = make_scheduler(s10);
  s->set_timesteps(4);
  EXPECT_EQ(s->timesteps()[3], 768.0f);  // 909/769 on the default grid
  SchedulerConfig fm = load_scheduler_config(stepmix::test::golden_path("scheduler/flowmatch_euler_shift3.json"));
  EXPECT_THROW(apply_overrides(fm, native), Error);
  SchedulerConfig karras = load_scheduler_config(stepmix::test::golden_path("scheduler/unipc_checkpoint_default.json"));
  EXPECT_THROW(apply_overrides(karras, native), Error);  // Karras kept on: the native grid is a flow grid
  native.use_karras_sigmas = false;
  apply_overrides(karras, native);
  EXPECT_TRUE(karras.unipc.native_flow_grid);
}

TEST(SchedulerOverrides, ShiftKarrasAndKind) {
  const std::string ck_path = stepmix::test::golden_path("scheduler/unipc_checkpoint_default.json");
  SchedulerConfig ck = load_scheduler_config(ck_path);
  SchedulerOverrides shift_only;
  shift_only.flow_shift = 10.0;
  EXPECT_THROW(apply_overrides(ck, shift_only), Error);  // Karras ignores the shift: say so

  // The Cosmos3 docs' recipe: from_config(flow_shift=10, use_karras_sigmas=False)
  // gives exactly the flowshift10 schedules.
  SchedulerOverrides recipe;
  recipe.flow_shift = 10.0;
  recipe.use_karras_sigmas = false;
  apply_overrides(ck, recipe);
  auto s = make_scheduler(ck);
  auto f = test::open_golden("scheduler/unipc_schedules.safetensors");
  for (int n : {4, 35}) {
    s->set_timesteps(n);
    EXPECT_TRUE(test::same_bits(s->sigmas(), test::f32(*f, "flowshift10.n" + std::to_string(n) + ".sigmas")));
  }
  // And back on: the file's sigma bounds were kept, but its shift of 10 would
  // be silently ignored by the Karras grid, so it must be reset explicitly.
  SchedulerConfig s10 = load_scheduler_config(stepmix::test::golden_path("scheduler/unipc_flowshift10.json"));
  SchedulerOverrides karras_on;
  karras_on.use_karras_sigmas = true;
  EXPECT_THROW(apply_overrides(s10, karras_on), Error);
  karras_on.flow_shift = 1.0;
  apply_overrides(s10, karras_on);
  s = make_scheduler(s10);
  s->set_timesteps(8);
  EXPECT_TRUE(test::same_bits(s->sigmas(), test::f32(*f, "checkpoint_default.n8.sigmas")));

  // Kind override: the shift and num_train_timesteps carry over.
  SchedulerConfig fm = load_scheduler_config(stepmix::test::golden_path("scheduler/flowmatch_euler_shift3.json"));
  SchedulerOverrides to_unipc;
  to_unipc.kind = SchedulerKind::unipc_multistep;
  apply_overrides(fm, to_unipc);
  EXPECT_EQ(fm.kind, SchedulerKind::unipc_multistep);
  s = make_scheduler(fm);
  EXPECT_EQ(s->name(), "UniPCMultistepScheduler");
  s->set_timesteps(50);
  EXPECT_TRUE(test::same_bits(s->sigmas(), test::f32(*f, "flowshift3.n50.sigmas")));
  SchedulerOverrides bad_shift;
  bad_shift.flow_shift = -2.0;
  EXPECT_THROW(apply_overrides(fm, bad_shift), Error);
}

}  // namespace
}  // namespace stepmix::sched
