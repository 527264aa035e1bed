#include "agent/cli/command_line.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringside::agent {
namespace {

const FlagSpec* FindLong(const CommandSpec& spec, const std::string& name) {
  for (const FlagSpec& f : spec.flags) {
    if (f.long_name == name) return &f;
  }
  return nullptr;
}

const FlagSpec* FindShort(const CommandSpec& spec, char name) {
  for (const FlagSpec& f : spec.flags) {
    if (f.short_name != 0 && f.short_name == name) return &f;
  }
  return nullptr;
}

absl::Status Add(const FlagSpec& f, const std::string& spelled, std::string value,
                 ParsedArgs* out) {
  std::vector<std::string>& values = out->flags[f.long_name];
  if (!values.empty() && !f.repeatable) {
    return absl::InvalidArgumentError(absl::StrCat(spelled, " is given twice"));
  }
  values.push_back(std::move(value));
  return absl::OkStatus();
}

// A flag argument split: "--output=x" or "-ox" is the flag spelled
// "--output" or "-o", with the value "x".
struct FlagArg {
  const FlagSpec* flag = nullptr;  // Null: the spec has no such flag.
  std::string spelled;
  std::string value;
  bool has_value = false;  // A value came with it ("=x", or after the short form).
};

FlagArg SplitFlagArg(const CommandSpec& spec, const std::string& a) {
  FlagArg f;
  if (absl::StartsWith(a, "--")) {
    const size_t eq = a.find('=');
    f.spelled = a.substr(0, eq);
    f.flag = FindLong(spec, f.spelled.substr(2));
    if (eq != std::string::npos) {
      f.value = a.substr(eq + 1);
      f.has_value = true;
    }
  } else {
    f.spelled = a.substr(0, 2);
    f.flag = FindShort(spec, a[1]);
    if (a.size() > 2) {
      f.value = a.substr(2);
      f.has_value = true;
    }
  }
  return f;
}

// Checks the value that came with flag argument `a` (args[*i]) against
// what its flag takes, and takes the next argument as the value of a flag
// that needs one not given with it.
absl::Status TakeValue(const std::vector<std::string>& args, size_t* i, FlagArg* f) {
  const std::string& a = args[*i];
  if (f->flag->optional_value) {
    // The value, if any, was given with '=' (or attached to the short
    // form, '=' or not: "-zdeflate", "-z=deflate").
    if (f->has_value && !absl::StartsWith(a, "--") && absl::StartsWith(f->value, "=")) {
      f->value.erase(0, 1);
    }
    // "--compress=" with nothing after it is a value left out by mistake
    // (a variable that expanded to nothing), not the flag alone.
    if (f->has_value && f->value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(a, " has nothing after '=': give a ", f->flag->value_name, " (", f->spelled,
                       "=", f->flag->value_name, "), or ", f->spelled, " alone for the default"));
    }
  } else if (f->flag->value_name.empty()) {
    if (f->has_value) {
      return absl::InvalidArgumentError(absl::StrCat(f->spelled, " takes no value"));
    }
  } else if (!f->has_value) {
    if (*i + 1 >= args.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(f->spelled, " needs a value (", f->spelled, " ", f->flag->value_name, ")"));
    }
    f->value = args[++*i];
  }
  return absl::OkStatus();
}

// What the spec allows of positional arguments and a command.
absl::Status CheckPositionalAndCommand(const CommandSpec& spec, const ParsedArgs& out) {
  if (spec.max_positional >= 0 &&
      out.positional.size() > static_cast<size_t>(spec.max_positional)) {
    return absl::InvalidArgumentError(
        spec.max_positional == 0
            ? absl::StrCat("unexpected argument '", out.positional[0], "'")
            : absl::StrCat("unexpected argument '", out.positional[spec.max_positional], "'"));
  }
  if (!spec.rest_is_command && !out.command.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ringside ", spec.name, " runs no command; unexpected '-- ", out.command[0], "'"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ParsedArgs::Get(const std::string& long_name, const std::string& fallback) const {
  auto it = flags.find(long_name);
  return it == flags.end() || it->second.empty() ? fallback : it->second.back();
}

const std::vector<std::string>& ParsedArgs::All(const std::string& long_name) const {
  static const std::vector<std::string>* none = new std::vector<std::string>();
  auto it = flags.find(long_name);
  return it == flags.end() ? *none : it->second;
}

absl::StatusOr<ParsedArgs> ParseArgs(const CommandSpec& spec,
                                     const std::vector<std::string>& args) {
  ParsedArgs out;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "--") {
      out.command.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (a == "-h" || a == "--help") {
      out.help = true;
      return out;
    }
    if (a.size() < 2 || a[0] != '-') {
      if (spec.rest_is_command) {
        out.command.assign(args.begin() + static_cast<long>(i), args.end());
        break;
      }
      out.positional.push_back(a);
      continue;
    }
    FlagArg f = SplitFlagArg(spec, a);
    if (f.flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag '", f.spelled, "' for ringside ", spec.name));
    }
    if (absl::Status s = TakeValue(args, &i, &f); !s.ok()) return s;
    if (absl::Status s = Add(*f.flag, f.spelled, std::move(f.value), &out); !s.ok()) return s;
  }
  if (absl::Status s = CheckPositionalAndCommand(spec, out); !s.ok()) return s;
  return out;
}

std::string UsageText(const CommandSpec& spec) {
  std::string text = absl::StrCat("usage: ", spec.synopsis, "\n\n", spec.summary, "\n");
  if (!spec.flags.empty()) {
    absl::StrAppend(&text, "\nFlags:\n");
    for (const FlagSpec& f : spec.flags) {
      std::string left = f.short_name != 0 ? absl::StrCat("-", std::string(1, f.short_name), ", ")
                                           : std::string("    ");
      absl::StrAppend(&left, "--", f.long_name);
      if (f.optional_value) {
        absl::StrAppend(&left, "[=", f.value_name, "]");
      } else if (!f.value_name.empty()) {
        absl::StrAppend(&left, " ", f.value_name);
      }
      if (left.size() < 26) left.resize(26, ' ');
      absl::StrAppend(&text, "  ", left);
      // The help, wrapped at 80 columns beside the flag.
      constexpr size_t kIndent = 29, kWidth = 80;
      std::string line;
      for (absl::string_view word : absl::StrSplit(f.help, ' ', absl::SkipEmpty())) {
        if (!line.empty() && kIndent + line.size() + 1 + word.size() > kWidth) {
          absl::StrAppend(&text, " ", line, "\n", std::string(kIndent - 1, ' '));
          line.clear();
        }
        absl::StrAppend(&line, line.empty() ? "" : " ", word);
      }
      absl::StrAppend(&text, " ", line);
      absl::StrAppend(&text, "\n");
    }
    absl::StrAppend(&text, "  -h, --help                 this text\n");
  }
  if (!spec.examples.empty()) absl::StrAppend(&text, "\nExamples:\n", spec.examples);
  return text;
}

int UsageError(const CommandSpec& spec, const std::string& message) {
  std::fprintf(stderr, "ringside %s: %s\nSee 'ringside %s --help'.\n", spec.name.c_str(),
               message.c_str(), spec.name.c_str());
  return kExitUsage;
}

std::string ClosestName(const std::string& typed, const std::vector<std::string>& names) {
  constexpr size_t kMaxEdits = 2;
  std::string best;
  size_t best_edits = kMaxEdits + 1;
  bool tie = false;
  for (const std::string& name : names) {
    // Optimal string alignment distance: Levenshtein plus swapped neighbours
    // ("recrod"), the typo hands make most.
    const size_t n = typed.size(), m = name.size();
    std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
    for (size_t i = 0; i <= n; i++) d[i][0] = i;
    for (size_t j = 0; j <= m; j++) d[0][j] = j;
    for (size_t i = 1; i <= n; i++) {
      for (size_t j = 1; j <= m; j++) {
        const size_t cost = typed[i - 1] == name[j - 1] ? 0 : 1;
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
        if (i > 1 && j > 1 && typed[i - 1] == name[j - 2] && typed[i - 2] == name[j - 1]) {
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    if (d[n][m] < best_edits) {
      best = name;
      best_edits = d[n][m];
      tie = false;
    } else if (d[n][m] == best_edits) {
      tie = true;
    }
  }
  return tie ? "" : best;
}

absl::StatusOr<absl::Duration> ParseDurationFlag(const std::string& flag, const std::string& text) {
  absl::Duration d;
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds) && seconds > 0) return absl::Seconds(seconds);
  if (absl::ParseDuration(text, &d) && d > absl::ZeroDuration()) return d;
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " ", text, ": not a duration (e.g. 10s, 500ms, 2m; plain: seconds)"));
}

absl::StatusOr<uint64_t> ParseSizeKb(const std::string& text) {
  std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  size_t digits = 0;
  while (digits < t.size() && absl::ascii_isdigit(t[digits])) digits++;
  // An optional fraction: "1.5M". Up to 9 digits of it, which is finer than
  // any unit's KiB.
  size_t fraction_digits = 0;
  size_t end = digits;
  if (end < t.size() && t[end] == '.') {
    end++;
    while (end < t.size() && absl::ascii_isdigit(t[end])) {
      end++;
      fraction_digits++;
    }
  }
  uint64_t n = 0, fraction = 0;
  if (digits == 0 || (end > digits && fraction_digits == 0) || fraction_digits > 9 ||
      !absl::SimpleAtoi(t.substr(0, digits), &n) ||
      (fraction_digits > 0 &&
       !absl::SimpleAtoi(t.substr(digits + 1, fraction_digits), &fraction))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "' is not a size (e.g. 64M, 1.5M, 512K, 1G; a plain number is KiB)"));
  }
  const std::string unit = t.substr(end);
  uint64_t kb_per_unit = 0;
  if (unit.empty() || unit == "k" || unit == "kb" || unit == "kib") {
    kb_per_unit = 1;
  } else if (unit == "m" || unit == "mb" || unit == "mib") {
    kb_per_unit = 1024;
  } else if (unit == "g" || unit == "gb" || unit == "gib") {
    kb_per_unit = 1024 * 1024;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' has an unknown unit '", unit, "' (K, M or G)"));
  }
  const uint64_t max_units = (uint64_t{1} << 40) / kb_per_unit;
  if (n > max_units || (n == max_units && fraction > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is too large"));
  }
  // n < 2^40 and fraction < 10^9 < 2^30: the products stay below 2^64.
  uint64_t scale = 1;
  for (size_t i = 0; i < fraction_digits; i++) scale *= 10;
  const uint64_t fraction_kb_scaled = fraction * kb_per_unit;
  if (fraction_kb_scaled % scale != 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a whole number of KiB"));
  }
  return n * kb_per_unit + fraction_kb_scaled / scale;
}

}  // namespace ringside::agent
