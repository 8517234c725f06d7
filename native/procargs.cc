// Platform-neutral: see procargs.h. The KERN_PROCARGS2 layout, as xnu's
// sysctl_procargsx and exec_copyout_strings write it:
//
//   int argc
//   exec path, NUL, NUL padding up to a multiple of the word size
//   argc argv strings, each NUL-terminated
//   environment strings, then NUL padding to the word size
//   the kernel's own "apple" strings (ptr_munge=, main_stack=, …), padding
//
// (a process may also pass empty environment entries, indistinguishable
// from padding).
//
// For a code-signing-restricted target xnu cuts the answer right after argv
// (its count starts after the exec path and all NULs that follow it). With
// the no-read-procargs entitlement it answers "path\0\0path\0", argc 1.
#include "procargs.h"

#include <cstring>

namespace proclease::procargs {
namespace {

const char* FindNul(const char* p, const char* end) {
  return static_cast<const char*>(memchr(p, '\0', static_cast<size_t>(end - p)));
}

}  // namespace

void PickEnv(const char* begin, const char* end, const std::vector<std::string>& keys,
             std::vector<std::pair<std::string, std::string>>& out) {
  if (keys.empty()) return;
  // callers ask for a handful of keys: no allocation for the usual case
  bool small[16] = {};
  std::vector<bool> large(keys.size() > 16 ? keys.size() : 0, false);
  auto found = [&](size_t k) -> bool { return keys.size() > 16 ? large[k] : small[k]; };
  size_t remaining = keys.size();
  const char* p = begin;
  while (p < end && remaining > 0) {
    const char* nul = FindNul(p, end);
    const char* stop = nul != nullptr ? nul : end;
    const size_t len = static_cast<size_t>(stop - p);
    // an entry is KEY=VALUE, split at its first '=': a key (which holds no
    // '=') matches when the entry starts with it and '=' follows, so one
    // scan per entry (for its NUL) is enough
    for (size_t k = 0; k < keys.size(); k++) {
      const size_t keyLen = keys[k].size();
      if (found(k) || len <= keyLen || p[keyLen] != '=' || memcmp(keys[k].data(), p, keyLen) != 0) continue;
      if (keys.size() > 16) {
        large[k] = true;
      } else {
        small[k] = true;
      }
      remaining--;
      out.emplace_back(keys[k], std::string(p + keyLen + 1, len - keyLen - 1));
      break;
    }
    p = stop + 1;
  }
}

void ParseProcArgs2(const char* buf, size_t len, size_t capacity, const std::vector<std::string>& keys,
                    ProcDetails& out) {
  out.hasArgv = false;
  out.argv.clear();
  out.envReadable = false;
  out.env.clear();
  if (len < sizeof(int32_t) || len >= capacity) return;
  int32_t argc = 0;
  memcpy(&argc, buf, sizeof argc);
  if (argc < 0) return;
  const char* path = buf + sizeof argc;
  const char* end = buf + len;
  const char* pathNul = FindNul(path, end);
  if (pathNul == nullptr) return;
  const size_t pathLen = static_cast<size_t>(pathNul - path);

  // The entitlement's synthetic answer: no padding rule, no environment.
  if (argc == 1 && static_cast<size_t>(end - pathNul) == 2 + pathLen + 1 && pathNul[1] == '\0' &&
      memcmp(pathNul + 2, path, pathLen) == 0 && end[-1] == '\0') {
    out.argv.emplace_back(path, pathLen);
    out.hasArgv = true;
    return;
  }

  // argv starts exactly at roundup(strlen(path) + 1, word): an empty argv[0]
  // right after the padding is an argument, not more padding.
  const size_t padded = (pathLen + 1 + kWordSize - 1) / kWordSize * kWordSize;
  if (padded > static_cast<size_t>(end - path)) return;
  const char* p = path + padded;
  for (const char* pad = pathNul; pad < p; pad++) {
    if (*pad != '\0') return;  // not the layout we know: nothing is guessed
  }
  out.argv.reserve(static_cast<size_t>(argc));
  for (int32_t i = 0; i < argc; i++) {
    const char* nul = p < end ? FindNul(p, end) : nullptr;
    if (nul == nullptr) {  // fewer than argc strings: a cut or a tail, unknown
      out.argv.clear();
      return;
    }
    out.argv.emplace_back(p, static_cast<size_t>(nul - p));
    p = nul + 1;
  }
  out.hasArgv = true;

  // Withheld environment: the answer ends right after argv. With an empty
  // argv[0], xnu's cut counts that argument's NUL as path padding and runs
  // one string long, so a single string ending the buffer is that overrun.
  if (p == end) return;
  if (argc > 0 && out.argv[0].empty() && FindNul(p, end) == end - 1) return;
  out.envReadable = true;
  // Environment, tail padding and the kernel's apple strings follow with no
  // count between them, and an empty entry looks like padding: scan to the
  // end so a present key is never missed. A key that only an apple string
  // carries (ptr_munge, main_stack, …) would read as present; callers ask
  // for their own markers, never for those.
  PickEnv(p, end, keys, out.env);
}

int StateLetter(uint32_t status) {
  switch (status) {
    case 1:  // SIDL: being created by fork
    case 2:  // SRUN
      return 'R';
    case 3:  // SSLEEP
      return 'S';
    case 4:  // SSTOP
      return 'T';
    case 5:  // SZOMB
      return 'Z';
    default:
      return '?';
  }
}

void MapBsdInfo(const BsdInfo& in, int32_t sid, ProcRecord& out) {
  out.pid = static_cast<int32_t>(in.pid);
  out.ppid = static_cast<int32_t>(in.ppid);
  out.pgid = static_cast<int32_t>(in.pgid);
  out.sid = sid;
  out.uid = static_cast<int32_t>(in.uid);
  out.state = StateLetter(in.status);
  out.flags = 0;  // macOS lists no kernel threads as processes and has no zombie leaders
  out.start = static_cast<double>(in.startSec) * 1e6 + static_cast<double>(in.startUsec);
}

}  // namespace proclease::procargs
