// ddp-client's command line (torchrun's flags) from arbitrary arguments:
// NUL-separated words through ParseLaunchOptions. Nothing may crash; an
// accepted command line (other than --help) has an entry point and sane node
// counts.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "client/launch_options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args = absl::StrSplit(text, '\0');
  if (args.size() > 64) args.resize(64);
  ddp::client::HostInfo host;
  host.cpu_count = 4;
  host.hostname = "fuzz-host";
  host.getenv = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  auto options = ddp::client::ParseLaunchOptions(args, host);
  if (options.ok() && !options->help) {  // --help (or a prefix of it) needs no entry point
    if (options->entrypoint.empty() || options->min_nodes < 1 ||
        options->min_nodes > options->max_nodes) {
      std::fprintf(stderr, "command_line_fuzz: accepted with entrypoint '%s', nodes %d:%d; args:",
                   options->entrypoint.c_str(), options->min_nodes, options->max_nodes);
      for (const std::string& arg : args) std::fprintf(stderr, " [%s]", arg.c_str());
      std::fprintf(stderr, "\n");
      std::abort();
    }
  }
  return 0;
}
