/* SPDX-License-Identifier: Apache-2.0 */
/* One main() for every CUnit suite: run the tests, exit non-zero on any failure. */
#ifndef CUBICLE_CUNIT_MAIN_H
#define CUBICLE_CUNIT_MAIN_H

#include <CUnit/Basic.h>
#include <stdlib.h>

struct cu_test {
	const char *name;
	void (*fn)(void);
};

static inline int cu_run(const char *suite, const struct cu_test *t)
{
	CU_pSuite s;
	unsigned fails;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite(suite, NULL, NULL);
	for (; t->name; t++)
		CU_add_test(s, t->name, t->fn);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}

#endif
