// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The verifier's "processed N insns" per program of BPF objects: each
 * program is loaded alone (the object's others not autoloaded) with
 * BPF_LOG_STATS, nothing pinned (maps are the object's own, gone at close).
 * Prints "<object> <program> <processed insns> <xlated insns>", or the
 * error for a program that does not load. For comparing a refactoring's
 * before and after (lab/verifier/insns.sh builds and runs it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include <bpf/bpf.h>

static int quiet(enum libbpf_print_level l, const char *f, va_list a)
{
	(void)l; (void)f; (void)a;
	return 0;
}

static char log_buf[1 << 20];

static int one(const char *path, const char *name)
{
	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	struct bpf_program *prog, *mine = NULL;
	struct bpf_map *map;
	const char *s;
	int err;

	if (!obj)
		return -errno;
	bpf_object__for_each_map(map, obj)
		bpf_map__set_pin_path(map, NULL);
	bpf_object__for_each_program(prog, obj) {
		if (strcmp(bpf_program__name(prog), name) == 0)
			mine = prog;
		else
			bpf_program__set_autoload(prog, false);
	}
	log_buf[0] = 0;
	bpf_program__set_log_buf(mine, log_buf, sizeof(log_buf));
	bpf_program__set_log_level(mine, 4); /* BPF_LOG_STATS */
	err = bpf_object__load(obj);
	if (err) {
		printf("%s %s LOAD-FAILED %d\n", path, name, err);
	} else {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);

		bpf_obj_get_info_by_fd(bpf_program__fd(mine), &info, &len);
		s = strstr(log_buf, "processed ");
		printf("%s %s %ld %u\n", path, name, s ? strtol(s + 10, NULL, 10) : -1L,
		       info.xlated_prog_len / 8);
	}
	bpf_object__close(obj);
	return 0;
}

int main(int argc, char **argv)
{
	libbpf_set_print(quiet);
	for (int i = 1; i < argc; i++) {
		struct bpf_object *obj = bpf_object__open_file(argv[i], NULL);
		struct bpf_program *prog;
		char names[64][128];
		int n = 0;

		if (!obj) {
			printf("%s OPEN-FAILED %d\n", argv[i], -errno);
			continue;
		}
		bpf_object__for_each_program(prog, obj)
			if (n < 64)
				snprintf(names[n++], sizeof(names[0]), "%s", bpf_program__name(prog));
		bpf_object__close(obj);
		for (int j = 0; j < n; j++)
			one(argv[i], names[j]);
	}
	return 0;
}
