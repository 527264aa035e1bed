#include "agent/tracefile/file_digest.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/file_io.h"

namespace ringside::agent {

absl::StatusOr<FileDigest> DigestFile(int fd, const std::string& name) {
  // OpenSSL's SHA-256 (libcrypto, Debian's libssl-dev): a checked,
  // accelerated implementation rather than a hand-written one.
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (ctx == nullptr || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return absl::InternalError(absl::StrCat("hashing ", name, ": SHA-256 is not available"));
  }
  FileDigest digest;
  auto buf = std::make_unique<char[]>(1 << 20);
  for (;;) {
    const ssize_t n = base::RetryOnEintr(
        [&] { return pread(fd, buf.get(), 1 << 20, static_cast<off_t>(digest.size)); });
    if (n < 0) {
      return absl::UnavailableError(absl::StrCat("reading ", name, ": ", std::strerror(errno)));
    }
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), buf.get(), static_cast<size_t>(n));
    digest.size += static_cast<uint64_t>(n);
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_size = 0;
  if (EVP_DigestFinal_ex(ctx.get(), md, &md_size) != 1) {
    return absl::InternalError(absl::StrCat("hashing ", name, ": SHA-256 failed"));
  }
  digest.sha256 =
      absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(md), md_size));
  return digest;
}

}  // namespace ringside::agent
