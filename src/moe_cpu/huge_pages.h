// Host memory on 2 MiB pages for the expert banks, and what the kernel actually gave.
//
// Why: the cpu backend's executor reads every layer's experts (15.5 GB for Qwen3-30B-A3B).
// On 4 KiB pages that is 31 MB of page-table entries, more than the caches hold; on 2 MiB
// pages 62 KB. cudaHostAlloc'd memory is never backed by transparent huge pages, so with
// FT_MOE_HOST_PAGES=huge the banks are mapped here (2 MiB aligned, MADV_HUGEPAGE) and then
// registered with CUDA (gpu/host_bank.cpp). Session 8 measured it on the H200 host with every
// bank byte on THP: no gain (the page walks are not the footprint's cost), so it is opt-in.
// Whether THP honours the advice depends on /sys/kernel/mm/transparent_hugepage/enabled
// (never / madvise / always), so the bytes actually on huge pages are read back from
// /proc/self/smaps and logged.
#pragma once

#include <cstddef>
#include <string>

namespace ft::moe_cpu {

inline constexpr size_t kHugePage = size_t{2} << 20;

// "enabled [madvise], defrag [madvise]" (the bracketed words of the two sysfs files), or
// "unknown" without sysfs.
std::string thp_settings();

// Bytes of [p, p + n) that /proc/self/smaps reports on anonymous huge pages (AnonHugePages
// of the mappings inside the range; a mapping that only overlaps counts in proportion).
size_t anon_huge_bytes(const void* p, size_t n);

// n bytes rounded up to 2 MiB, anonymous, private, 2 MiB aligned, advised MADV_HUGEPAGE
// (advice only: pages are allocated by the first touch). Throws ft::Error when the mapping
// fails. *mapped gets the length to pass to unmap_huge.
void* map_huge(size_t n, size_t* mapped);
void unmap_huge(void* p, size_t mapped);

// Touches every page of [p, p + n) for writing with up to n_threads threads (the first touch
// zeroes the page: one thread reaches a few GB/s, a 15 GB bank wants several).
void touch_pages(void* p, size_t n, int n_threads);

}  // namespace ft::moe_cpu
