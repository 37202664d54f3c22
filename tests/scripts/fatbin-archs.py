#!/usr/bin/env python3
"""fatbin-archs.py FILE: list the images in the CUDA fatbinary (.nv_fatbin
section) of an ELF object or executable, one per line, "elf sm_NN" (machine
code) or "ptx sm_NN" (PTX for compute_NN), as cuobjdump --list-elf/--list-ptx
would; for toolkits installed without cuobjdump. The fatbinary is a series of
blocks (magic 0xBA55ED50, header size, bytes), each a series of entries
(kind 1 PTX / 2 ELF, header size, payload size, architecture at byte 28)."""
import struct
import sys


def section(data, name):
    shoff, = struct.unpack_from('<Q', data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', data, 0x3A)
    def sh(i):
        return struct.unpack_from('<IIQQQQ', data, shoff + i * shentsize)
    stroff = sh(shstrndx)[4]
    for i in range(shnum):
        nm, _, _, _, off, size = sh(i)
        end = data.index(b'\0', stroff + nm)
        if data[stroff + nm:end].decode() == name:
            return data[off:off + size]
    return b''


def main():
    data = open(sys.argv[1], 'rb').read()
    if data[:4] != b'\x7fELF' or data[4] != 2:
        sys.exit('%s: not a 64-bit ELF file' % sys.argv[1])
    fat = section(data, '.nv_fatbin')
    off = 0
    while off + 16 <= len(fat):
        magic, _, hsz, fsz = struct.unpack_from('<IHHQ', fat, off)
        if magic != 0xBA55ED50:
            off += 8  # blocks are 8-byte aligned
            continue
        p, end = off + hsz, off + hsz + fsz
        while p + 32 <= end:
            kind, _, ehsz, psz = struct.unpack_from('<HHIQ', fat, p)
            arch, = struct.unpack_from('<I', fat, p + 28)
            print('%s sm_%d' % ({1: 'ptx', 2: 'elf'}.get(kind, 'kind%d' % kind), arch))
            p += ehsz + psz
        off = end


main()
