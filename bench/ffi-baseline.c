/*
 * svcmap FFI bench, the C baseline: the same libbpf calls that
 * bench/ffi-binding.ts makes through koffi and ffi-napi, straight from C.
 *
 *   ffi-baseline noop|update|batch TARGET_MS [BATCH]
 *
 * The map is the bench's own: an unpinned BPF hash map (u32 key, 20-byte
 * value) passed in as fd 3 and already holding keys 0..max_entries-1, so
 * every update replaces an element. The loop runs in chunks until TARGET_MS
 * have passed (CLOCK_MONOTONIC) and prints one line, "OPS SECONDS": calls
 * for noop and update, entries for batch.
 *   noop    libbpf_major_version(): the cost of a call with no syscall
 *   update  bpf_map_update_elem(fd, &key, value, BPF_ANY), key i % max_entries
 *   batch   bpf_map_update_batch() of BATCH consecutive keys, with the
 *           opts svcmap's shim passes (elem_flags 0)
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAP_FD 3
#define VALUE_SIZE 20

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fail(const char *what, int rc)
{
	char msg[128];

	libbpf_strerror(rc, msg, sizeof(msg));
	fprintf(stderr, "ffi-baseline: %s: %s (%d)\n", what, msg, rc);
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: ffi-baseline noop|update|batch TARGET_MS [BATCH]\n");
		return 2;
	}
	const char *op = argv[1];
	double target = atof(argv[2]) / 1000;
	uint32_t batch = argc > 3 ? (uint32_t)atoi(argv[3]) : 1024;

	struct bpf_map_info info;
	uint32_t info_len = sizeof(info);
	memset(&info, 0, sizeof(info));
	int rc = bpf_obj_get_info_by_fd(MAP_FD, &info, &info_len);
	if (rc < 0)
		fail("map info of fd 3", rc);
	if (info.key_size != 4 || info.value_size != VALUE_SIZE) {
		fprintf(stderr, "ffi-baseline: fd 3 is not a u32 -> %d-byte map\n", VALUE_SIZE);
		return 1;
	}
	uint32_t entries = info.max_entries;

	uint64_t ops = 0;
	double start = now(), elapsed = 0;

	if (strcmp(op, "noop") == 0) {
		volatile uint32_t sink = 0;
		do {
			for (int i = 0; i < 65536; i++)
				sink += libbpf_major_version();
			ops += 65536;
		} while ((elapsed = now() - start) < target);
		(void)sink;
	} else if (strcmp(op, "update") == 0) {
		uint8_t value[VALUE_SIZE] = { 1 };
		uint32_t key = 0;
		do {
			for (int i = 0; i < 256; i++) {
				key = (uint32_t)(ops + i) % entries;
				rc = bpf_map_update_elem(MAP_FD, &key, value, BPF_ANY);
				if (rc < 0)
					fail("bpf_map_update_elem", rc);
			}
			ops += 256;
		} while ((elapsed = now() - start) < target);
	} else if (strcmp(op, "batch") == 0) {
		if (batch == 0 || entries % batch != 0) {
			fprintf(stderr, "ffi-baseline: BATCH must divide max_entries %u\n", entries);
			return 2;
		}
		uint32_t *keys = malloc((size_t)entries * sizeof(*keys));
		uint8_t *values = calloc(entries, VALUE_SIZE);
		if (!keys || !values)
			return 1;
		for (uint32_t i = 0; i < entries; i++)
			keys[i] = i;
		LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = 0);
		uint32_t off = 0;
		do {
			uint32_t count = batch;
			rc = bpf_map_update_batch(MAP_FD, keys + off, values + (size_t)off * VALUE_SIZE, &count, &opts);
			if (rc < 0)
				fail("bpf_map_update_batch", rc);
			ops += count;
			off = (off + batch) % entries;
		} while ((elapsed = now() - start) < target);
		free(keys);
		free(values);
	} else {
		fprintf(stderr, "ffi-baseline: unknown op %s\n", op);
		return 2;
	}
	printf("%llu %.9f\n", (unsigned long long)ops, elapsed);
	return 0;
}
