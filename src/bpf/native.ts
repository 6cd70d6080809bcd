// The FFI: libbpf.so.1 and svcmap's shim (native/), bound with koffi. This is
// the only file that declares C prototypes; everything above it uses the
// typed wrappers in map.ts, object.ts and link.ts. Buffers passed to `void *`
// go to C without a length, so callers check lengths before they get here.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import koffi, { type LibraryHandle } from 'koffi';

/** The repository (or installed package) root: the nearest folder above this file with package.json and bpf/. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'bpf'))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`cannot find the svcmap package root above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
}

export function shimPath(): string {
  return process.env.SVCMAP_SHIM ?? join(packageRoot(), 'native', 'build', 'libsvcmap_shim.so');
}

// Opaque handles are BigInt pointers in koffi 3; null pointers come back as null.
export type Ptr = bigint;

function bind() {
  let libbpf: LibraryHandle;
  try {
    libbpf = koffi.load('libbpf.so.1');
  } catch (err) {
    throw new Error(`cannot load libbpf.so.1 (install libbpf1: apt-get install libbpf1): ${(err as Error).message}`);
  }
  const path = shimPath();
  if (!existsSync(path)) {
    throw new Error(`the native shim is not built: ${path} is missing (run make native)`);
  }
  const shim = koffi.load(path);
  koffi.opaque('bpf_object');
  koffi.opaque('bpf_map');
  koffi.opaque('bpf_program');
  koffi.opaque('btf');

  return {
    // libbpf: objects
    objectLoad: libbpf.func('int bpf_object__load(bpf_object *obj)'),
    objectClose: libbpf.func('void bpf_object__close(bpf_object *obj)'),
    objectBtf: libbpf.func('btf *bpf_object__btf(const bpf_object *obj)'),
    objectNextMap: libbpf.func('bpf_map *bpf_object__next_map(const bpf_object *obj, const bpf_map *map)'),
    objectNextProgram: libbpf.func('bpf_program *bpf_object__next_program(const bpf_object *obj, bpf_program *prog)'),
    mapName: libbpf.func('const char *bpf_map__name(const bpf_map *map)'),
    mapFd: libbpf.func('int bpf_map__fd(const bpf_map *map)'),
    mapSetMaxEntries: libbpf.func('int bpf_map__set_max_entries(bpf_map *map, uint32_t max_entries)'),
    mapMaxEntries: libbpf.func('uint32_t bpf_map__max_entries(const bpf_map *map)'),
    mapPinPath: libbpf.func('const char *bpf_map__pin_path(const bpf_map *map)'),
    mapSetPinPath: libbpf.func('int bpf_map__set_pin_path(bpf_map *map, const char *path)'),
    mapKeySize: libbpf.func('uint32_t bpf_map__key_size(const bpf_map *map)'),
    mapValueSize: libbpf.func('uint32_t bpf_map__value_size(const bpf_map *map)'),
    mapType: libbpf.func('int bpf_map__type(const bpf_map *map)'),
    mapFlags: libbpf.func('uint32_t bpf_map__map_flags(const bpf_map *map)'),
    programName: libbpf.func('const char *bpf_program__name(const bpf_program *prog)'),
    programSectionName: libbpf.func('const char *bpf_program__section_name(const bpf_program *prog)'),
    programFd: libbpf.func('int bpf_program__fd(const bpf_program *prog)'),
    programExpectedAttachType: libbpf.func('int bpf_program__expected_attach_type(const bpf_program *prog)'),
    btfParse: libbpf.func('btf *btf__parse(const char *path, void *ext)'),
    btfFree: libbpf.func('void btf__free(btf *btf)'),
    strerror: libbpf.func('int libbpf_strerror(int err, _Out_ char *buf, size_t size)'),
    programSetAutoload: libbpf.func('int bpf_program__set_autoload(bpf_program *prog, bool autoload)'),
    programType: libbpf.func('int bpf_program__type(const bpf_program *prog)'),
    progTypeName: libbpf.func('const char *libbpf_bpf_prog_type_str(int t)'),
    attachTypeName: libbpf.func('const char *libbpf_bpf_attach_type_str(int t)'),
    btfLoadVmlinux: libbpf.func('btf *btf__load_vmlinux_btf(void)'),
    btfFindByNameKind: libbpf.func('int btf__find_by_name_kind(const btf *btf, const char *name, uint32_t kind)'),

    // libbpf: feature probes (load a minimal program, attach nothing)
    probeProgType: libbpf.func('int libbpf_probe_bpf_prog_type(int prog_type, const void *opts)'),
    probeHelper: libbpf.func('int libbpf_probe_bpf_helper(int prog_type, int helper_id, const void *opts)'),

    // libbpf: the syscall wrappers (flat arguments, NULL opts)
    mapCreate: libbpf.func(
      'int bpf_map_create(int map_type, const char *name, uint32_t key_size, uint32_t value_size, uint32_t max_entries, void *opts)',
    ),
    mapUpdate: libbpf.func('int bpf_map_update_elem(int fd, const void *key, const void *value, uint64_t flags)'),
    mapLookup: libbpf.func('int bpf_map_lookup_elem(int fd, const void *key, void *value)'),
    mapDelete: libbpf.func('int bpf_map_delete_elem(int fd, const void *key)'),
    mapNextKey: libbpf.func('int bpf_map_get_next_key(int fd, const void *key, void *next_key)'),
    objPin: libbpf.func('int bpf_obj_pin(int fd, const char *path)'),
    objGet: libbpf.func('int bpf_obj_get(const char *path)'),
    linkCreate: libbpf.func('int bpf_link_create(int prog_fd, int target_fd, int attach_type, void *opts)'),
    linkUpdate: libbpf.func('int bpf_link_update(int link_fd, int new_prog_fd, void *opts)'),
    linkDetach: libbpf.func('int bpf_link_detach(int link_fd)'),
    progGetFdById: libbpf.func('int bpf_prog_get_fd_by_id(uint32_t id)'),
    mapGetFdById: libbpf.func('int bpf_map_get_fd_by_id(uint32_t id)'),
    progDetach2: libbpf.func('int bpf_prog_detach2(int prog_fd, int attachable_fd, int type)'),

    // the shim
    shimAbiVersion: shim.func('int svcmap_shim_abi_version(void)'),
    logCapture: shim.func('void svcmap_log_capture(int echo_level)'),
    logTake: shim.func('int svcmap_log_take(void *buf, size_t size)'),
    open: shim.func('bpf_object *svcmap_open(const char *path, const char *pin_root, void *log_buf, size_t log_size, uint32_t log_level)'),
    mapInfo: shim.func(
      'int svcmap_map_info(int fd, void *type, void *id, void *key_size, void *value_size, void *max_entries, void *map_flags, void *name, size_t name_size)',
    ),
    progInfo: shim.func('int svcmap_prog_info(int fd, void *type, void *id, void *tag_hex, void *name, size_t name_size)'),
    linkInfo: shim.func('int svcmap_link_info(int fd, void *type, void *id, void *prog_id, void *attach_type, void *target)'),
    mapUpdateBatch: shim.func(
      'int svcmap_map_update_batch(int fd, const void *keys, const void *values, void *count, uint64_t elem_flags)',
    ),
    mapDeleteBatch: shim.func('int svcmap_map_delete_batch(int fd, const void *keys, void *count)'),
    mapLookupBatch: shim.func(
      'int svcmap_map_lookup_batch(int fd, void *in_batch, void *out_batch, void *keys, void *values, void *count)',
    ),
    tcxLinkCreate: shim.func('int svcmap_tcx_link_create(int prog_fd, int ifindex, int ingress)'),
    tcxAttachType: shim.func('int svcmap_tcx_attach_type(int ingress)'),
    tcAttach: shim.func('int svcmap_tc_attach(int ifindex, int ingress, int prog_fd, uint32_t handle, uint32_t priority, int replace)'),
    tcDetach: shim.func('int svcmap_tc_detach(int ifindex, int ingress, uint32_t handle, uint32_t priority)'),
    tcQuery: shim.func('int svcmap_tc_query(int ifindex, int ingress, uint32_t handle, uint32_t priority, void *prog_id)'),
    progTestRun: shim.func(
      'int svcmap_prog_test_run(int prog_fd, const void *data_in, uint32_t size_in, void *data_out, void *size_out, const void *ctx_in, uint32_t ctx_size_in, void *ctx_out, void *ctx_size_out, uint32_t repeat, void *retval, void *duration)',
    ),
    btfStruct: shim.func('int svcmap_btf_struct(const btf *btf, const char *name, void *size, void *members)'),
    btfMember: shim.func(
      'int svcmap_btf_member(const btf *btf, const char *name, uint32_t idx, void *member_name, size_t name_size, void *bit_offset, void *bitfield_size, void *byte_size)',
    ),
    iterRunInNetns: shim.func('int64_t svcmap_iter_run_in_netns(int link_fd, int netns_fd)'),
    nlWatch: shim.func('int svcmap_nl_watch(uint32_t groups)'),
    genlWatch: shim.func('int svcmap_genl_watch(uint32_t group)'),
    iterMapLinkCreate: shim.func('int svcmap_iter_map_link_create(int prog_fd, int map_fd)'),
    mount: shim.func(
      'int svcmap_mount(int mntns_fd, int cgroupns_fd, const char *source, const char *target, const char *fstype, unsigned long flags, const char *data, int make_dir)',
    ),
  };
}

export type Native = ReturnType<typeof bind>;

/** svcmap_shim_abi_version() of the shim these bindings were written for (native/svcmap_shim.c). */
const SHIM_ABI_VERSION = 5;

let bound: Native | undefined;

/** The bound functions, loaded on first use so that pure code never needs libbpf. */
export function native(): Native {
  if (!bound) {
    bound = bind();
    if (bound.shimAbiVersion() !== SHIM_ABI_VERSION)
      throw new Error(`native shim ABI mismatch at ${shimPath()}: rebuild it with make native`);
    // libbpf's warnings go into the shim's buffer; errors carry them.
    bound.logCapture(process.env.SVCMAP_LIBBPF_DEBUG ? 3 : -1);
  }
  return bound;
}

/** libbpf's messages since the last call (warnings and errors, not debug). */
export function takeLibbpfLog(): string {
  const buf = Buffer.alloc(64 * 1024);
  const n = native().logTake(buf, buf.length) as number;
  return buf.toString('utf8', 0, n);
}

/** A NUL-terminated C string out of a buffer. */
export function cString(buf: Buffer): string {
  const end = buf.indexOf(0);
  return buf.toString('utf8', 0, end < 0 ? buf.length : end);
}

let trim: ((pad: number) => number) | null | undefined;

/**
 * glibc's malloc_trim(0): hands the free memory of every malloc arena back
 * to the system (after the heap reclaim, src/agent/loops/heap.ts: measured -25 MiB
 * RSS at 10k Services). False where there is no glibc to ask.
 */
export function mallocTrim(): boolean {
  if (trim === undefined) {
    try {
      trim = koffi.load('libc.so.6').func('int malloc_trim(size_t pad)') as (pad: number) => number;
    } catch {
      trim = null;
    }
  }
  if (!trim) return false;
  trim(0);
  return true;
}
