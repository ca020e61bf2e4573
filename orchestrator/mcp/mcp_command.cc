#include "orchestrator/mcp/mcp_command.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <ext/stdio_filebuf.h>

#include <filesystem>
#include <iostream>
#include <istream>
#include <ostream>

#include "orchestrator/core/local_launcher.h"
#include "orchestrator/mcp/mcp_server.h"
#include "orchestrator/mcp/sextant_toolbox.h"

namespace sextant {

int RunMcpCommand(const std::string& root, Clock* clock) {
  // The protocol keeps stdout to itself: it writes to a copy of it, and fd 1 becomes stderr,
  // so that a stray print of any library cannot corrupt a message.
  const int protocol_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (protocol_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    std::cerr << "sextant mcp: cannot set up stdout\n";
    return 1;
  }
  std::cout.rdbuf(std::cerr.rdbuf());
  signal(SIGPIPE, SIG_IGN);  // a client that goes away is an error on write, not a kill

  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  std::unique_ptr<ProcessLauncher> launcher = NewPosixProcessLauncher();
  SextantToolboxOptions options;
  options.root = root;
  options.sextant_binary = ec ? "sextant" : self;
  options.launcher = launcher.get();
  options.clock = clock;
  absl::StatusOr<std::unique_ptr<Toolbox>> toolbox = NewSextantToolbox(options);
  if (!toolbox.ok()) {
    std::cerr << "sextant mcp: " << toolbox.status().message() << "\n";
    return 2;
  }
  std::cerr << "sextant mcp: serving MCP " << kMcpProtocolVersion << " on stdio, root "
            << std::filesystem::canonical(root, ec).string() << "\n";
  __gnu_cxx::stdio_filebuf<char> in_buf(STDIN_FILENO, std::ios::in);
  __gnu_cxx::stdio_filebuf<char> out_buf(protocol_fd, std::ios::out);
  std::istream in(&in_buf);
  std::ostream out(&out_buf);
  McpServer server(toolbox->get());
  absl::Status served = server.Serve(in, out);
  if (!served.ok()) {
    std::cerr << "sextant mcp: " << served.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace sextant
