// The pure parts of the macOS backend, kept free of any macOS header so the
// Linux build and a Linux test harness compile exactly the code the darwin
// build runs: the KERN_PROCARGS2 parser, the proc_bsdinfo → ProcRecord
// mapping, and the one environment picker both OS files use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "facts.h"

namespace proclease::procargs {

// xnu pads the exec path to the pointer size of the target process; every
// process a supported macOS runs is 64-bit.
constexpr size_t kWordSize = 8;

// Picks only the requested keys out of NUL-separated "KEY=value" entries in
// [begin, end). The first occurrence of a key wins, as with getenv(3);
// empty entries and entries without '=' are skipped. Found pairs are
// appended in scan order. Linux environ and macOS KERN_PROCARGS2 share it.
void PickEnv(const char* begin, const char* end, const std::vector<std::string>& keys,
             std::vector<std::pair<std::string, std::string>>& out);

// Parses a KERN_PROCARGS2 answer into out.hasArgv/argv and
// out.envReadable/env (only the requested keys). `len` is what sysctl
// returned, `capacity` the buffer size it was given. Fails closed:
// - len == capacity: the strings may have overflowed and xnu keeps the
//   tail, so nothing is known (hasArgv and envReadable stay false);
// - fewer than argc strings, a bad argc, or a padding byte that is not NUL:
//   nothing is known;
// - the buffer ends right after argv (code-signing-restricted targets) or is
//   the no-read-procargs entitlement's synthetic answer: argv is known, the
//   environment is withheld (envReadable false), never "keys absent".
void ParseProcArgs2(const char* buf, size_t len, size_t capacity, const std::vector<std::string>& keys,
                    ProcDetails& out);

// The proc_bsdinfo fields a record needs, copied out by the darwin file.
struct BsdInfo {
  uint32_t pid = 0;
  uint32_t ppid = 0;
  uint32_t pgid = 0;
  uint32_t uid = 0;   // effective (pbi_uid)
  uint32_t ruid = 0;  // real (pbi_ruid)
  uint32_t status = 0;
  uint64_t startSec = 0;
  uint64_t startUsec = 0;
};

// p_stat (SIDL…SZOMB) → the letter ps(1) prints.
int StateLetter(uint32_t status);

// One record: start = seconds * 1e6 + microseconds (exact in a double until
// the year 2255), uid = effective uid; sid comes from getsid(2), -1 unknown.
void MapBsdInfo(const BsdInfo& in, int32_t sid, ProcRecord& out);

}  // namespace proclease::procargs
