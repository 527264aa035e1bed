#include "tests/deploy/testing/kubernetes_manifests.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringside::deploy_testing {

CommandResult ValidateManifests(const std::string& args) {
  return RunShell(absl::StrCat("node tests/deploy/validate_manifests.mjs ", ToolsDir(), " ", args));
}

absl::StatusOr<nlohmann::json> KubernetesDocuments() {
  std::string args = "--json";
  for (const char* m : kKubernetesManifests) absl::StrAppend(&args, " ", m);
  const CommandResult r = ValidateManifests(args);
  // Errors go to stderr, the JSON to stdout: the JSON is the last line.
  const std::vector<std::string> lines = absl::StrSplit(r.output, '\n', absl::SkipEmpty());
  nlohmann::json docs = lines.empty() ? nlohmann::json()
                                      : nlohmann::json::parse(lines.back(), nullptr,
                                                              /*allow_exceptions=*/false);
  if (r.exit_code != 0 || !docs.is_array()) {
    return absl::FailedPreconditionError(
        absl::StrCat("validate_manifests.mjs exited ", r.exit_code, " with:\n", r.output));
  }
  return docs;
}

nlohmann::json FindDocument(const nlohmann::json& documents, const std::string& kind,
                            const std::string& name) {
  for (const nlohmann::json& d : documents) {
    const nlohmann::json& doc = d["doc"];
    if (doc.value("kind", "") != kind) continue;
    if (!name.empty() && doc["metadata"].value("name", "") != name) continue;
    return doc;
  }
  return nullptr;
}

}  // namespace ringside::deploy_testing
