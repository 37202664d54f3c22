/* Mappings placed for 2 MiB pages, shared by libivm (the PEs' maps of
 * copies) and ivmd (the copies it puts in 2 MiB pages). A shmem file's 2 MiB
 * page is mapped by one page-middle-directory entry only where the mapping's
 * address and the file offset agree modulo 2 MiB; the kernel places a memfd
 * mapping at any page otherwise, and each of its 512 pages then costs a page
 * table entry, a TLB entry and, under shadow paging, a trip to the hypervisor
 * on first touch in every process. */
#ifndef IVM_COMMON_HUGEMAP_H
#define IVM_COMMON_HUGEMAP_H

#include <stddef.h>
#include <sys/types.h>

#define IVM_HUGE_PAGE_SIZE ((size_t)2 << 20) /* bytes: a PMD-mapped page on x86-64 and arm64 */

/* mmap(NULL, len, prot, flags, fd, off), at an address congruent to off
 * modulo IVM_HUGE_PAGE_SIZE when len reaches that size (smaller mappings go
 * where the kernel puts them). flags must not hold MAP_FIXED. Returns the
 * mapping, exactly len bytes, or MAP_FAILED with errno. */
void *ivm_hugemap_mmap(size_t len, int prot, int flags, int fd, off_t off);

#endif /* IVM_COMMON_HUGEMAP_H */
