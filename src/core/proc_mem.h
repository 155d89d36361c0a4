// The process's resident memory as the kernel counts it (/proc/self/status): what the
// load report gives beside the bytes the model needs, so "host RAM used" is a measurement.
#pragma once

#include <cstdint>
#include <string>

namespace ft {

struct ProcMem {
  bool ok = false;     // false where /proc/self/status is not readable (not Linux)
  int64_t rss = 0;     // VmRSS, bytes
  int64_t peak = 0;    // VmHWM
  int64_t anon = 0;    // RssAnon (pinned banks, heap)
  int64_t file = 0;    // RssFile (mapped model file pages)
  int64_t shmem = 0;   // RssShmem (a model file on tmpfs, e.g. /dev/shm)
};

ProcMem read_proc_mem();
// Parses the text of a /proc/PID/status file (the kB fields above).
ProcMem parse_proc_status(const std::string& text);
// "resident 17,012 MiB (anon 16,100, file 12, shmem 900; peak 33,020)"; "" when !ok.
std::string describe(const ProcMem& m);

// The machine's physical memory in bytes (sysconf), 0 where unknown.
int64_t physical_memory_bytes();

}  // namespace ft
