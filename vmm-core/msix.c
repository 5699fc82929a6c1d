/* SPDX-License-Identifier: Apache-2.0 */
/* MSI-X emulation for one PCI function: vector table, pending bits,
 * per-vector and function masks, and delivery outside the lock. */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "msix.h"

struct msg {
	uint64_t addr;
	uint32_t data;
};

int msix_init(struct msix *m, unsigned n, msix_send_fn *send, void *arg)
{
	memset(m, 0, sizeof(*m));
	if (!n || n > MSIX_MAX_VECTORS)
		return -EINVAL;
	m->table = calloc(n, sizeof(*m->table));
	m->pba = calloc((n + 63) / 64, sizeof(*m->pba));
	if (!m->table || !m->pba) {
		msix_free(m);
		return -ENOMEM;
	}
	for (unsigned v = 0; v < n; v++)
		m->table[v][3] = MSIX_CTRL_MASKED; /* masked at reset */
	m->n = n;
	m->send = send;
	m->arg = arg;
	pthread_mutex_init(&m->lock, NULL);
	return 0;
}

void msix_free(struct msix *m)
{
	if (m->n)
		pthread_mutex_destroy(&m->lock);
	free(m->table);
	free(m->pba);
	memset(m, 0, sizeof(*m));
}

void msix_set_send(struct msix *m, msix_send_fn *send, void *arg)
{
	pthread_mutex_lock(&m->lock);
	m->send = send;
	m->arg = arg;
	pthread_mutex_unlock(&m->lock);
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

uint32_t msix_table_size(const struct msix *m)
{
	return m->n * MSIX_ENTRY_SIZE;
}

uint32_t msix_pba_size(const struct msix *m)
{
	return (m->n + 63) / 64 * 8;
}

void msix_cap(const struct msix *m, unsigned bir, uint32_t table_off, uint32_t pba_off,
	      uint8_t cap[MSIX_CAP_LEN], uint8_t wmask[MSIX_CAP_LEN])
{
	memset(cap, 0, MSIX_CAP_LEN);
	memset(wmask, 0, MSIX_CAP_LEN);
	cap[0] = 0x11; /* PCI_CAP_ID_MSIX */
	cap[2] = (uint8_t)(m->n - 1); /* table size, N-1 encoded, bits 10:0 */
	cap[3] = (uint8_t)((m->n - 1) >> 8);
	put32(cap + 4, (table_off & ~7u) | (bir & 7));
	put32(cap + 8, (pba_off & ~7u) | (bir & 7));
	wmask[3] = (MSIX_FLAGS_ENABLE | MSIX_FLAGS_MASKALL) >> 8;
}

static bool masked_locked(const struct msix *m, unsigned v)
{
	return m->masked || (m->table[v][3] & MSIX_CTRL_MASKED);
}

static void message_locked(const struct msix *m, unsigned v, struct msg *out)
{
	out->addr = (uint64_t)m->table[v][1] << 32 | m->table[v][0];
	out->data = m->table[v][2];
}

/* Pending vectors no longer masked: clear them and collect their messages
 * into @out (room for m->n). Returns how many. */
static unsigned unmasked_locked(struct msix *m, struct msg *out)
{
	unsigned n = 0;

	if (!m->enabled || m->masked)
		return 0;
	for (unsigned v = 0; v < m->n; v++) {
		uint64_t bit = 1ull << (v % 64);

		if (!(m->pba[v / 64] & bit) || masked_locked(m, v))
			continue;
		m->pba[v / 64] &= ~bit;
		message_locked(m, v, &out[n++]);
	}
	return n;
}

/* Deliver collected messages; the lock is dropped, send may sleep. */
static void deliver(struct msix *m, const struct msg *msgs, unsigned n)
{
	msix_send_fn *send;
	void *arg;

	if (!n)
		return;
	pthread_mutex_lock(&m->lock);
	send = m->send;
	arg = m->arg;
	pthread_mutex_unlock(&m->lock);
	for (unsigned i = 0; i < n; i++) {
		int ret = send(arg, msgs[i].addr, msgs[i].data);

		if (ret && ratelimit_ok(&m->rl))
			log_warn("MSI-X message to 0x%" PRIx64 " data 0x%x: %s", msgs[i].addr,
				 msgs[i].data, strerror(-ret));
	}
}

/* Send every pending vector that is no longer masked. */
static void release_pending(struct msix *m)
{
	struct msg small[8], *msgs = small;
	unsigned n;

	if (m->n > 8 && !(msgs = malloc(m->n * sizeof(*msgs))))
		return; /* they stay pending; the next unmask retries */
	pthread_mutex_lock(&m->lock);
	n = unmasked_locked(m, msgs);
	pthread_mutex_unlock(&m->lock);
	deliver(m, msgs, n);
	if (msgs != small)
		free(msgs);
}

void msix_table_io(struct msix *m, uint64_t off, void *data, uint32_t len, bool is_write)
{
	uint8_t *b = data;
	bool unmask = false;

	if (!is_write)
		memset(data, 0, len);
	if ((len != 4 && len != 8) || (off & (len - 1)) || off >= msix_table_size(m))
		return;
	pthread_mutex_lock(&m->lock);
	for (unsigned i = 0; i < len; i += 4) {
		unsigned v = (unsigned)(off + i) / MSIX_ENTRY_SIZE;
		unsigned f = (unsigned)(off + i) % MSIX_ENTRY_SIZE / 4;
		uint32_t x;

		if (!is_write) {
			put32(b + i, m->table[v][f]);
			continue;
		}
		memcpy(&x, b + i, 4);
		x = le32toh(x);
		if (f == 0)
			x &= ~3u; /* dword-aligned message address */
		else if (f == 3)
			x &= MSIX_CTRL_MASKED; /* the rest is reserved */
		if (f == 3 && !x && (m->table[v][3] & MSIX_CTRL_MASKED))
			unmask = true;
		m->table[v][f] = x;
	}
	pthread_mutex_unlock(&m->lock);
	if (unmask)
		release_pending(m);
}

void msix_pba_io(struct msix *m, uint64_t off, void *data, uint32_t len, bool is_write)
{
	uint64_t w;

	if (!is_write)
		memset(data, 0, len);
	if (is_write || (len != 4 && len != 8) || (off & (len - 1)) || off >= msix_pba_size(m))
		return; /* read-only */
	pthread_mutex_lock(&m->lock);
	w = htole64(m->pba[off / 8]);
	pthread_mutex_unlock(&m->lock);
	memcpy(data, (uint8_t *)&w + (off & 7), len);
}

void msix_control(struct msix *m, uint16_t ctl)
{
	pthread_mutex_lock(&m->lock);
	m->enabled = ctl & MSIX_FLAGS_ENABLE;
	m->masked = ctl & MSIX_FLAGS_MASKALL;
	pthread_mutex_unlock(&m->lock);
	release_pending(m);
}

bool msix_notify(struct msix *m, unsigned vec)
{
	struct msg msg;
	bool now = false, enabled;

	pthread_mutex_lock(&m->lock);
	enabled = m->enabled;
	if (enabled && vec < m->n) {
		if (masked_locked(m, vec))
			m->pba[vec / 64] |= 1ull << (vec % 64);
		else
			now = true;
		if (now)
			message_locked(m, vec, &msg);
	}
	pthread_mutex_unlock(&m->lock);
	if (now)
		deliver(m, &msg, 1);
	return enabled;
}

void msix_clear_pending(struct msix *m)
{
	pthread_mutex_lock(&m->lock);
	memset(m->pba, 0, (m->n + 63) / 64 * sizeof(*m->pba));
	pthread_mutex_unlock(&m->lock);
}

/* State: u32 enabled, u32 masked, the table (n x 16 bytes), the PBA. */
size_t msix_state_size(const struct msix *m)
{
	return 8 + (size_t)m->n * MSIX_ENTRY_SIZE + (m->n + 63) / 64 * sizeof(uint64_t);
}

void msix_save(struct msix *m, uint8_t *buf)
{
	uint32_t flags[2];

	pthread_mutex_lock(&m->lock);
	flags[0] = m->enabled;
	flags[1] = m->masked;
	memcpy(buf, flags, 8);
	memcpy(buf + 8, m->table, (size_t)m->n * MSIX_ENTRY_SIZE);
	memcpy(buf + 8 + (size_t)m->n * MSIX_ENTRY_SIZE, m->pba, (m->n + 63) / 64 * sizeof(uint64_t));
	pthread_mutex_unlock(&m->lock);
}

int msix_load(struct msix *m, const uint8_t *buf, size_t len)
{
	size_t words = (m->n + 63) / 64;
	uint32_t flags[2];
	uint64_t last;

	if (len != msix_state_size(m))
		return -EINVAL;
	memcpy(flags, buf, 8);
	memcpy(&last, buf + len - 8, 8);
	if (flags[0] > 1 || flags[1] > 1 || (m->n % 64 && (last >> (m->n % 64))))
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	m->enabled = flags[0];
	m->masked = flags[1];
	memcpy(m->table, buf + 8, (size_t)m->n * MSIX_ENTRY_SIZE);
	memcpy(m->pba, buf + 8 + (size_t)m->n * MSIX_ENTRY_SIZE, words * sizeof(uint64_t));
	pthread_mutex_unlock(&m->lock);
	return 0;
}
