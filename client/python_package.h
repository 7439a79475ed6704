#ifndef DDP_CLIENT_PYTHON_PACKAGE_H_
#define DDP_CLIENT_PYTHON_PACKAGE_H_

// The ddp_coordinator Python package (python/) that ships with ddp-client: the
// agent puts the folder holding it on its workers' PYTHONPATH, so a training
// script can `import ddp_coordinator` with nothing installed (and gets the
// version that matches its agent). The folder is the binary's Bazel runfiles'
// ddp_coordinator/python (//python:ddp_coordinator, generated stubs included);
// installed by tools/install.sh it is PREFIX/lib/python3/dist-packages beside
// PREFIX/bin/ddp-client. Without either (a binary copied alone) PYTHONPATH is
// left alone: the package installed by tools/setup.sh, if any, serves.
//
// Thread-safety: pure functions (BundledPythonPackagePath reads the file
// system).

#include <string>

#include "client/worker_env.h"

namespace ddp::client {

// The folder to put on PYTHONPATH: "<runfiles>/ddp_coordinator/python" where
// it holds ddp_coordinator/__init__.py, the runfiles being `executable` +
// ".runfiles", else $RUNFILES_DIR, else $TEST_SRCDIR of `env` (ddp-client run
// by a Bazel test), else the installed layout `executable`/../../lib/python3/
// dist-packages. "" when none holds the package.
std::string BundledPythonPackagePath(const std::string& executable, const EnvMap& env);

// `env` with `path` appended to PYTHONPATH (after the user's entries, which
// win), or PYTHONPATH set to it when unset or empty; unchanged when `path` is
// empty or already listed.
EnvMap WithPythonPath(EnvMap env, const std::string& path);

// `env` with `path` put first on PYTHONPATH (moved there when already
// listed): for a folder whose modules must win over the user's, such as the
// agent's sitecustomize.py. Unchanged when `path` is empty.
EnvMap WithPythonPathFirst(EnvMap env, const std::string& path);

// This process's executable (/proc/self/exe resolved); "" when unknown.
std::string CurrentExecutable();

}  // namespace ddp::client

#endif  // DDP_CLIENT_PYTHON_PACKAGE_H_
