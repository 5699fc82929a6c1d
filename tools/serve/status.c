/* SPDX-License-Identifier: Apache-2.0 */
/* The status page at / : the sandboxes (state, template, age, memory) and a plot of recent create latencies, as plain HTML + SVG. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/* @s with HTML's special characters escaped, appended to the stream. */
static void esc(FILE *f, const char *s)
{
	for (; *s; s++)
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
}

static void plot(FILE *f, const double *v, unsigned n)
{
	double max = 1;
	const int w = 600, h = 160;

	for (unsigned i = 0; i < n; i++)
		if (v[i] > max)
			max = v[i];
	fprintf(f, "<svg width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"create latency\">"
		   "<rect width=\"%d\" height=\"%d\" fill=\"#f6f6f6\"/>", w + 60, h + 30, w + 60, h + 30);
	fprintf(f, "<text x=\"2\" y=\"12\" font-size=\"11\">%.0f ms</text>"
		   "<text x=\"2\" y=\"%d\" font-size=\"11\">0</text>", max, h + 10);
	if (n) {
		fputs("<polyline fill=\"none\" stroke=\"#2a6\" stroke-width=\"2\" points=\"", f);
		for (unsigned i = 0; i < n; i++)
			fprintf(f, "%.1f,%.1f ", 50 + (n > 1 ? (double)i * w / (n - 1) : 0),
				10 + h - v[i] / max * h);
		fputs("\"/>", f);
		for (unsigned i = 0; i < n; i++)
			fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#2a6\"/>",
				50 + (n > 1 ? (double)i * w / (n - 1) : 0), 10 + h - v[i] / max * h);
	}
	fputs("</svg>", f);
}

void status_page(struct hconn *c);
void status_page(struct hconn *c)
{
	char *buf = NULL, a[40];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	double lat[64];
	unsigned n_lat, total;
	time_t now = time(NULL);

	if (!f) {
		hio_error(c, 500, "out of memory");
		return;
	}
	fputs("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>cubicle serve</title>"
	      "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
	      "td,th{border:1px solid #ccc;padding:4px 10px;text-align:left}"
	      ".running{color:#080}.paused{color:#a60}</style></head><body>"
	      "<h1>cubicle serve</h1>", f);
	unsigned pooled = 0, n = 0, cap;
	struct sandbox **all;

	/* The list, referenced, under the lock; /proc is read after it. */
	pthread_mutex_lock(&srv.lock);
	cap = srv.n_sandboxes;
	all = calloc(cap + 1, sizeof(*all));
	for (struct sandbox *s = srv.list; all && s && n < cap; s = s->next) {
		s->refs++;
		all[n++] = s;
		pooled += s->state == SBX_POOLED;
	}
	n_lat = srv.n_lat < 64 ? srv.n_lat : 64;
	total = srv.n_lat;
	for (unsigned i = 0; i < n_lat; i++)
		lat[i] = srv.lat[(total - n_lat + i) % 64];
	pthread_mutex_unlock(&srv.lock);
	fprintf(f, "<p>%u sandboxes and %u warm pool clones (at most %u in all); state folder <code>",
		n - pooled, pooled, srv.max_sandboxes);
	esc(f, srv.state_dir);
	fputs("</code></p><table><tr><th>sandbox</th><th>state</th><th>template</th><th>age</th>"
	      "<th>memory (VMM RSS)</th><th>ends in</th></tr>", f);
	for (unsigned i = 0; i < n; i++) {
		struct sandbox *s = all[i];
		unsigned long long rss;
		double cpu;

		sbx_usage(s, &rss, &cpu);
		fprintf(f, "<tr><td><code>%s</code></td><td class=\"%s\">%s</td><td>", s->id,
			sbx_state_name(s->state), sbx_state_name(s->state));
		esc(f, s->template_id);
		fprintf(f, "</td><td>%lld s</td><td>%.1f MiB</td>", (long long)(now - s->started),
			rss / 1024.0);
		if (s->state == SBX_POOLED)
			fputs("<td>&ndash;</td></tr>", f);
		else
			fprintf(f, "<td>%lld s</td></tr>", (long long)(s->end - now));
		sbx_put(s);
	}
	free(all);
	iso_time(now, a, sizeof(a));
	fprintf(f, "</table><h2>Create latency (last %u of %u creates: template clone to agent ready)</h2>",
		n_lat, total);
	plot(f, lat, n_lat);
	fprintf(f, "<p><small>%s</small></p></body></html>\n", a);
	fclose(f);
	hio_reply(c, 200, "text/html; charset=utf-8", buf, len, NULL);
	free(buf);
}
