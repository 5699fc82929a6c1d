# SPDX-License-Identifier: Apache-2.0
# From the macros of <asm/unistd.h> (cpp -dM): a C table of system call
# names by number, for the SIGSYS handler, which may not allocate memory.
# Aliases (aarch64's __NR_fcntl __NR3264_fcntl) are followed; where two
# names share a number the first in byte order stands.
$1 == "#define" && $2 ~ /^__NR/ { v[$2] = $3 }
END {
	for (k in v) {
		if (k !~ /^__NR_/)
			continue
		n = v[k]
		for (i = 0; i < 4 && n !~ /^[0-9]+$/ && (n in v); i++)
			n = v[n]
		name = substr(k, 6)
		if (n !~ /^[0-9]+$/ || name == "syscalls" || name == "arch_specific_syscall")
			continue
		n += 0
		if (!(n in by) || name < by[n])
			by[n] = name
		if (n > max)
			max = n
	}
	print "/* Generated from <asm/unistd.h> by vmm-core/sysnames.awk. */"
	print "static const char *const sys_names[] = {"
	for (n = 0; n <= max; n++)
		if (n in by)
			printf "\t[%d] = \"%s\",\n", n, by[n]
	print "};"
}
