// `fblc compile` writes everything it was asked to or fails: weights it cannot write (an external
// data file missing, an unwritable path) exit 1 in one line and leave no new plan, and a plan
// that was there stays as it was. `--no-weights` is how a model without weights is planned.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

namespace {

namespace fs = std::filesystem;

struct Run {
  int status = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::stringstream s;
  s << std::ifstream(path, std::ios::binary).rdbuf();
  return s.str();
}

Run fblc(const std::string& args, const std::string& dir) {
  const std::string out = dir + "/stdout", err = dir + "/stderr";
  const int st = std::system((std::string(FBL_BIN_DIR) + "/fblc compile " + args + " > " + out + " 2> " + err).c_str());
  return Run{WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(out), slurp(err)};
}

size_t lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

TEST_CASE("fblc compile: weights it cannot write fail the compile and leave no new plan", "[driver][compile]") {
  const std::string dir = (fs::temp_directory_path() / ("fbl-compile-command-" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string profile = " --profile " + std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  const std::string full = std::string(FBL_TEST_DATA_DIR) + "/llama-full/model.onnx";
  const std::string tiny = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx";

  // llama-full ships without its external data file.
  const Run refused = fblc(full + profile + " -o " + dir + "/full.fbp", dir);
  CHECK(refused.status == 1);
  CHECK(lines(refused.err) == 1);
  CHECK_THAT(refused.err, Catch::Contains("external data file") && Catch::Contains("is missing; nothing written") &&
                              Catch::Contains("--no-weights"));
  CHECK_FALSE(fs::exists(dir + "/full.fbp"));
  CHECK_FALSE(fs::exists(dir + "/full.safetensors"));

  const Run planOnly = fblc(full + profile + " --no-weights -o " + dir + "/full.fbp", dir);
  INFO(planOnly.err);
  CHECK(planOnly.status == 0);
  CHECK_THAT(planOnly.out, Catch::Contains("weights: not written (--no-weights)"));
  CHECK(fs::exists(dir + "/full.fbp"));
  CHECK_FALSE(fs::exists(dir + "/full.safetensors"));

  // Weights to a folder that does not exist: exit 1, and the plan already there is untouched.
  std::ofstream(dir + "/tiny.fbp") << "the previous plan";
  const Run unwritable = fblc(tiny + profile + " -o " + dir + "/tiny.fbp --weights " + dir + "/no-such-dir/w.safetensors", dir);
  CHECK(unwritable.status == 1);
  CHECK(lines(unwritable.err) == 1);
  CHECK_THAT(unwritable.err, Catch::Contains("error: weights: cannot write '" + dir + "/no-such-dir/w.safetensors.tmp'") &&
                                 Catch::Contains("the plan was not written"));
  CHECK(slurp(dir + "/tiny.fbp") == "the previous plan");

  const Run both = fblc(tiny + profile + " -o " + dir + "/tiny.fbp --weights " + dir + "/w.safetensors --no-weights", dir);
  CHECK(both.status == 2);
  CHECK_THAT(both.err, Catch::Contains("give --weights or --no-weights, not both"));

  const Run ok = fblc(tiny + profile + " -o " + dir + "/tiny.fbp", dir);
  INFO(ok.err);
  CHECK(ok.status == 0);
  CHECK_THAT(ok.out, Catch::Contains("weights: " + dir + "/tiny.safetensors"));
  CHECK(slurp(dir + "/tiny.fbp") != "the previous plan");
  CHECK(fs::exists(dir + "/tiny.safetensors"));
  fs::remove_all(dir);
}
