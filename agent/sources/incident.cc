#include "agent/sources/incident.h"

namespace ringside::agent {

const char* IncidentKindName(Incident::Kind kind) {
  switch (kind) {
    case Incident::Kind::kOomKill:
      return "oom_kill";
    case Incident::Kind::kFatalSignal:
      return "fatal_signal";
    case Incident::Kind::kCoreDump:
      return "core_dump";
  }
  return "unknown";
}

}  // namespace ringside::agent
