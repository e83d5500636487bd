import { execFileSync } from 'node:child_process';
import zlib from 'node:zlib';

/**
 * zstd-compressed bytes, as Codex sends its request bodies: Node's own compressor where it has one
 * (22.15 and later), else the `zstd` command (Debian's package; .ci/run installs it).
 */
export function zstdCompress(bytes: Buffer, level = 3): Buffer {
  const native = (zlib as { zstdCompressSync?: (b: Buffer, o?: object) => Buffer }).zstdCompressSync;
  if (native) return native(bytes, { params: { [(zlib.constants as Record<string, number>).ZSTD_c_compressionLevel]: level } });
  return execFileSync('zstd', ['-q', '-c', `-${level}`], { input: bytes, maxBuffer: 256 * 1024 * 1024 });
}
