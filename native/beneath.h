// File access confined beneath a root folder (beneath_posix.cc), for the
// files an ACP agent asks the gateway to read or write. Plain data in and
// out: which outcomes are refused, and why, is src/acpx/fs-beneath.ts's.
#pragma once

#include <cstdint>
#include <string>

namespace proclease {

// Where a confined job stopped (mirrors BENEATH_STEP in src/facts/native-binding.ts).
constexpr int kBeneathRoot = 0;       // opening the root folder
constexpr int kBeneathRootMoved = 1;  // the root's dev/ino are not the pinned ones
constexpr int kBeneathResolve = 2;    // resolving the path beneath the root
constexpr int kBeneathType = 3;       // the resolved file is not a regular file (mode says what it is)
constexpr int kBeneathTooLarge = 4;   // over maxBytes
constexpr int kBeneathOpen = 5;       // opening the resolved file for reading or writing
constexpr int kBeneathIo = 6;         // read, truncate or write
constexpr int kBeneathMkdir = 7;      // making a missing folder
constexpr int kBeneathDone = 8;

// How the path was resolved.
constexpr int kHowOpenat2 = 1;  // openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS): links that stay beneath are followed
constexpr int kHowWalk = 2;     // one openat(O_NOFOLLOW) per component: every symlink is refused

struct BeneathTarget {
  std::string root;     // the root folder's real path
  uint64_t rootDev = 0;  // its identity when the session pinned it
  uint64_t rootIno = 0;
  std::string rel;      // normalised, relative, no "." or ".." components; "" is the root itself
  bool walkOnly = false;  // skip openat2 (tests of the fallback)
};

struct BeneathResult {
  int err = 0;  // 0 or -errno
  int step = kBeneathRoot;
  int how = 0;
  uint32_t mode = 0;  // st_mode of the resolved file once known
  double size = 0;
  bool created = false;  // a write made the file
  std::string data;      // a read's bytes
};

void ReadBeneath(const BeneathTarget& t, size_t maxBytes, BeneathResult& out);
void WriteBeneath(const BeneathTarget& t, const std::string& data, BeneathResult& out);

}  // namespace proclease
