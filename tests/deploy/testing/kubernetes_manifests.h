#ifndef RINGSIDE_TESTS_DEPLOY_TESTING_KUBERNETES_MANIFESTS_H_
#define RINGSIDE_TESTS_DEPLOY_TESTING_KUBERNETES_MANIFESTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tests/deploy/testing/deploy_files.h"

namespace ringside::deploy_testing {

// deploy/kubernetes/'s manifests, by path from the source tree.
inline constexpr const char* kKubernetesManifests[] = {
    "deploy/kubernetes/namespace.yaml", "deploy/kubernetes/configmap.yaml",
    "deploy/kubernetes/daemonset.yaml", "deploy/kubernetes/networkpolicy.yaml"};

// tests/deploy/validate_manifests.mjs (with the tools `make deps` installs)
// on `args` (file names, options).
CommandResult ValidateManifests(const std::string& args);

// Every document of deploy/kubernetes/'s manifests as the script parsed
// (and validated) them: [{"file": ..., "doc": {...}}, ...]. An error with
// what the script printed when it did not pass or print them.
absl::StatusOr<nlohmann::json> KubernetesDocuments();

// The document of `kind` (and `name`, when not empty) among `documents`;
// null if there is none.
nlohmann::json FindDocument(const nlohmann::json& documents, const std::string& kind,
                            const std::string& name = "");

}  // namespace ringside::deploy_testing

#endif  // RINGSIDE_TESTS_DEPLOY_TESTING_KUBERNETES_MANIFESTS_H_
