/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A streaming multipart/form-data parser (RFC 7578 over RFC 2046): bytes go
 * in as they arrive, part contents come out as they are found, and a
 * delimiter split across two feeds is still found. Memory is the struct:
 * a partly matched delimiter is a count (its bytes are the delimiter's own),
 * part headers are bounded by MP_HEADERS_MAX.
 *
 * The delimiter is "\r\n--" BOUNDARY. A boundary holds no CR or LF, so when
 * a partial match fails no suffix of it can start a new match except at a
 * CR: that is why a count is enough (no KMP table).
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "multipart.h"

static bool bchar(int ch)
{
	return isalnum(ch) || strchr("'()+_,-./:=? ", ch);
}

int mp_boundary(const char *ctype, char *out, size_t len)
{
	const char *p;
	size_t n = 0;

	if (!ctype || strncasecmp(ctype, "multipart/form-data", 19))
		return -1;
	p = ctype + 19;
	while (*p) {
		while (*p == ';' || *p == ' ' || *p == '\t')
			p++;
		if (!strncasecmp(p, "boundary=", 9)) {
			bool quoted;
			p += 9;
			quoted = *p == '"';
			if (quoted)
				p++;
			while (*p && (quoted ? *p != '"' : (*p != ';' && *p != ' ' && *p != '\t'))) {
				if (!bchar((unsigned char)*p) || n + 1 >= len || n >= MP_BOUNDARY_MAX)
					return -1;
				out[n++] = *p++;
			}
			if (quoted && *p != '"')
				return -1;
			if (!n || out[n - 1] == ' ')
				return -1;
			out[n] = 0;
			return 0;
		}
		while (*p && *p != ';') {
			if (*p == '"') { /* skip a quoted parameter value */
				p++;
				while (*p && *p != '"')
					p += (*p == '\\' && p[1]) ? 2 : 1;
				if (*p)
					p++;
			} else {
				p++;
			}
		}
	}
	return -1;
}

void mp_init(struct multipart *m, const char *boundary, const struct mp_ops *ops, void *arg)
{
	size_t bl = strlen(boundary);

	memset(m, 0, sizeof(*m));
	if (bl > MP_BOUNDARY_MAX)
		bl = MP_BOUNDARY_MAX;
	memcpy(m->delim, "\r\n--", 4);
	memcpy(m->delim + 4, boundary, bl);
	m->dlen = 4 + bl;
	m->ops = ops;
	m->arg = arg;
	m->state = MP_PREAMBLE;
	/* The first delimiter may open the body: as if a CRLF came before it. */
	m->match = 2;
}

static int fail(struct multipart *m, const char *why)
{
	m->state = MP_ERROR;
	m->error = why;
	return -1;
}

/*
 * Looks for the delimiter in DATA; with EMIT, hands the bytes before it to
 * ops->data. Returns 1 when found (*used: bytes up to its end), 0 when the
 * buffer ran out, or an ops error.
 */
static int scan(struct multipart *m, const char *data, size_t len, bool emit, size_t *used)
{
	size_t i = 0, run = 0, mstart = 0, carried = m->match;
	int rc;

	while (i < len) {
		if (m->match == 0) {
			const char *cr = memchr(data + i, '\r', len - i);
			if (!cr) {
				i = len;
				break;
			}
			i = (size_t)(cr - data);
			mstart = i;
			m->match = 1;
			i++;
			continue;
		}
		if (data[i] == m->delim[m->match]) {
			m->match++;
			i++;
			if (m->match == m->dlen) {
				if (emit && !carried && mstart > run &&
						(rc = m->ops->data(m->arg, data + run, mstart - run)))
					return rc;
				m->match = 0;
				*used = i;
				return 1;
			}
			continue;
		}
		/* Mismatch: what matched was data after all. */
		if (carried) {
			if (emit && (rc = m->ops->data(m->arg, m->delim, carried)))
				return rc;
			carried = 0;
		}
		m->match = 0;
	}
	*used = len;
	if (!emit)
		return 0;
	if (m->match && carried)
		return 0; /* all of this buffer is a (longer) partial match */
	if (m->match)
		return mstart > run ? m->ops->data(m->arg, data + run, mstart - run) : 0;
	return len > run ? m->ops->data(m->arg, data + run, len - run) : 0;
}

/* Reads PARAM="value" or PARAM=token from a Content-Disposition line. */
static void disp_param(const char *line, const char *param, char *out, size_t len)
{
	size_t pl = strlen(param);
	const char *p = strchr(line, ';');

	out[0] = 0;
	while (p) {
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!strncasecmp(p, param, pl) && p[pl] == '=') {
			size_t n = 0;
			p += pl + 1;
			if (*p == '"') {
				p++;
				while (*p && *p != '"') {
					if (*p == '\\' && p[1])
						p++;
					if (n + 1 < len)
						out[n++] = *p;
					p++;
				}
			} else {
				while (*p && *p != ';' && *p != ' ' && *p != '\t') {
					if (n + 1 < len)
						out[n++] = *p;
					p++;
				}
			}
			out[n] = 0;
			return;
		}
		/* skip this parameter, minding quotes */
		while (*p && *p != ';') {
			if (*p == '"') {
				p++;
				while (*p && *p != '"')
					p += (*p == '\\' && p[1]) ? 2 : 1;
				if (!*p)
					return;
			}
			p++;
		}
		if (!*p)
			return;
	}
}

static int headers_done(struct multipart *m)
{
	char name[MP_NAME_MAX], filename[MP_NAME_MAX];
	char *line = m->hdr;

	name[0] = filename[0] = 0;
	m->hdr[m->hlen] = 0;
	while (line && *line) {
		char *eol = strstr(line, "\r\n");
		if (eol)
			*eol = 0;
		if (!strncasecmp(line, "content-disposition:", 20)) {
			const char *v = line + 20;
			while (*v == ' ' || *v == '\t')
				v++;
			if (strncasecmp(v, "form-data", 9))
				return fail(m, "a part is not form-data");
			disp_param(v, "name", name, sizeof(name));
			disp_param(v, "filename", filename, sizeof(filename));
		}
		line = eol ? eol + 2 : NULL;
	}
	m->in_part = true;
	m->state = MP_BODY;
	m->match = 0;
	return m->ops->part(m->arg, name, filename);
}

int mp_feed(struct multipart *m, const char *data, size_t len)
{
	size_t i = 0, used = 0;
	int rc;

	while (i < len) {
		unsigned char ch = (unsigned char)data[i];

		switch (m->state) {
		case MP_PREAMBLE:
		case MP_BODY:
			rc = scan(m, data + i, len - i, m->state == MP_BODY, &used);
			i += used;
			if (rc < 0 || rc > 1)
				return rc;
			if (rc == 1) {
				if (m->in_part) {
					m->in_part = false;
					if ((rc = m->ops->end(m->arg)))
						return rc;
				}
				m->state = MP_AFTER_DELIM;
			}
			break;
		case MP_AFTER_DELIM:
			i++;
			if (ch == '-')
				m->state = MP_AFTER_DASH;
			else if (ch == '\r')
				m->state = MP_AFTER_DELIM_CR;
			else if (ch != ' ' && ch != '\t')
				return fail(m, "junk after a boundary");
			break;
		case MP_AFTER_DELIM_CR:
			i++;
			if (ch != '\n')
				return fail(m, "CR without LF after a boundary");
			m->state = MP_HEADERS;
			m->hlen = 0;
			break;
		case MP_AFTER_DASH:
			i++;
			if (ch != '-')
				return fail(m, "junk after a boundary");
			m->state = MP_DONE;
			break;
		case MP_HEADERS:
			i++;
			if (m->hlen >= MP_HEADERS_MAX)
				return fail(m, "part headers too large");
			m->hdr[m->hlen++] = (char)ch;
			if ((m->hlen == 2 && !memcmp(m->hdr, "\r\n", 2)) ||
					(m->hlen >= 4 && !memcmp(m->hdr + m->hlen - 4, "\r\n\r\n", 4))) {
				if ((rc = headers_done(m)))
					return rc;
			}
			break;
		case MP_DONE:
			return 0; /* the epilogue is ignored */
		case MP_ERROR:
			return -1;
		}
	}
	return 0;
}

int mp_finish(struct multipart *m)
{
	if (m->state == MP_DONE)
		return 0;
	if (m->state != MP_ERROR)
		fail(m, "the body ended before the closing boundary");
	return -1;
}
