/* SPDX-License-Identifier: Apache-2.0 */
/* `cubicle template build|list|rm` (template.c). */
#ifndef CUBICLE_SERVE_TEMPLATE_H
#define CUBICLE_SERVE_TEMPLATE_H

/* argv[0] is "template". Returns the exit status. */
int template_main(int argc, char **argv);

#endif
