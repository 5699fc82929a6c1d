/* SPDX-License-Identifier: Apache-2.0 */
/* The VM config model: a libconfig file checked against a schema, plus
 * --set overrides. Device parameters are checked later, against the
 * plugin's own parameter table (devices.c). */
#ifndef CUBICLE_CONFIG_H
#define CUBICLE_CONFIG_H

#include <libconfig.h>
#include <stdbool.h>
#include <stdint.h>

#include "cubicle/plugin.h"

enum boot_format { BOOT_AUTO = 0, BOOT_BZIMAGE, BOOT_ELF, BOOT_FLAT };
enum boot_mode { BOOT_MODE_REAL = 0, BOOT_MODE_PROTECTED, BOOT_MODE_LONG };

struct boot_cfg {
	const char *kernel;  /* path, ~ and ${VAR} expanded, relative to the config */
	const char *initrd;  /* NULL if none */
	const char *cmdline; /* "" if none */
	enum boot_format format;
	enum boot_mode mode; /* flat payloads only */
	uint64_t load_addr;  /* flat payloads only: where the image goes */
	uint64_t entry;      /* flat payloads only: first instruction (default load_addr) */
};

struct dev_cfg {
	const char *type; /* plugin name */
	const char *id;   /* instance id, unique */
	config_setting_t *group;
	int line;         /* line of the group in the config file */
};

struct vm_config {
	config_t lc;
	char *path;       /* the config file as given */
	char *dir;        /* its directory, for relative paths */
	unsigned vcpus;
	uint64_t memory_mib;
	int log_level;
	bool host_check;
	struct boot_cfg boot;
	struct dev_cfg *devs;
	unsigned n_devs;
	char **strs;      /* strings the config owns (expanded paths); freed at the end */
	unsigned n_strs;
	/* Settings written by --set, so errors can name the option, not a line. */
	const config_setting_t **set_nodes;
	char **set_args;
	unsigned n_sets;
};

#define CONFIG_MAX_VCPUS 64

/*
 * Load path, apply overrides ("machine.vcpus=4"), check the schema.
 * On error returns -errno and writes one line "FILE:LINE: what is wrong;
 * expected ..." into err.
 */
int config_load(struct vm_config *c, const char *path, char *const *sets, unsigned n_sets,
		char *err, size_t errlen);
void config_free(struct vm_config *c);

/* Where a setting came from, for messages: "FILE:LINE" or "--set ARG". */
void config_where(const struct vm_config *c, const config_setting_t *s, char *buf, size_t len);

/* Expand a leading "~/" and ${NAME} references; relative results are taken
 * against dir. Returns a malloc'd string or NULL with a reason in err. */
char *config_expand_path(const char *in, const char *dir, char *err, size_t errlen);

/* Parse sizes such as "64M", "1G", "4096", "2K". -EINVAL if malformed. */
int config_parse_size(const char *s, uint64_t *out);

#endif
