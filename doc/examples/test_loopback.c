/* SPDX-License-Identifier: Apache-2.0 */
/* Unit test of the example "loopback" net backend on the fake host: the
 * built loopback.so, called the way a network device calls it. */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include <CUnit/Basic.h>
#include <cubicle/testing/fake_host.h>

static const struct cub_plugin *plug;
static void *dl;

static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

static void test_echo(void)
{
	const struct cub_net_ops *o = plug->ops;
	const char *const kv[] = { "mtu", "9000", NULL };
	uint8_t frame[60] = { 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 0x08, 0x00 };
	uint8_t got[64], tiny[8];
	struct iovec tx[2] = { { frame, 14 }, { frame + 14, sizeof(frame) - 14 } };
	struct iovec rx = { got, sizeof(got) }, small = { tiny, sizeof(tiny) };
	struct cub_net_info info;
	struct cub_net_stats st;
	struct fake_host fh;
	void *cfg, *priv = NULL;

	fake_host_init(&fh);
	cfg = fake_cfg_new(plug, kv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	CU_ASSERT_EQUAL_FATAL(o->open(fake_inst(&fh), &fh.ops, cfg, &priv), 0);
	o->info(priv, &info);
	CU_ASSERT(info.rx_fd >= 0 && info.tx_fd >= 0 && info.link_up);
	CU_ASSERT_EQUAL(info.mtu, 9000);
	CU_ASSERT(!info.vnet_hdr && !info.offloads);

	CU_ASSERT_EQUAL(o->recv(priv, &rx, 1), 0); /* nothing waiting: 0, no blocking */
	CU_ASSERT(!readable(info.rx_fd));
	CU_ASSERT_EQUAL(o->send(priv, tx, 2), (int64_t)sizeof(frame));
	CU_ASSERT(readable(info.rx_fd)); /* what the device's event loop waits for */
	CU_ASSERT_EQUAL(o->recv(priv, &rx, 1), (int64_t)sizeof(frame));
	CU_ASSERT_EQUAL(got[0], 2); /* swap_mac: it comes back as a reply */
	CU_ASSERT_EQUAL(got[6], 1);
	CU_ASSERT_EQUAL(got[12], 0x08);

	CU_ASSERT_EQUAL(o->send(priv, tx, 2), (int64_t)sizeof(frame));
	CU_ASSERT_EQUAL(o->recv(priv, &small, 1), -EMSGSIZE); /* consumed and dropped */
	CU_ASSERT(!readable(info.rx_fd));

	o->stats(priv, &st);
	CU_ASSERT_EQUAL(st.tx_packets, 2);
	CU_ASSERT_EQUAL(st.rx_packets, 1);
	o->close(priv);
	fake_cfg_free(plug, cfg);
	fake_host_fini(&fh);
}

/* Until the receiver drains, send says -EAGAIN and tx_fd is not writable. */
static void test_backpressure(void)
{
	const struct cub_net_ops *o = plug->ops;
	uint8_t frame[1514] = { 0 };
	struct iovec tx = { frame, sizeof(frame) }, rx = { frame, sizeof(frame) };
	struct cub_net_info info;
	struct fake_host fh;
	struct pollfd p;
	void *cfg, *priv = NULL;
	int64_t r;
	unsigned sent = 0;

	fake_host_init(&fh);
	cfg = fake_cfg_new(plug, NULL);
	CU_ASSERT_EQUAL_FATAL(o->open(fake_inst(&fh), &fh.ops, cfg, &priv), 0);
	o->info(priv, &info);
	while ((r = o->send(priv, &tx, 1)) > 0 && sent < 100000)
		sent++;
	CU_ASSERT_EQUAL(r, -EAGAIN);
	CU_ASSERT(sent > 0);
	p = (struct pollfd){ .fd = info.tx_fd, .events = POLLOUT };
	CU_ASSERT_EQUAL(poll(&p, 1, 0), 0);
	while (o->recv(priv, &rx, 1) > 0)
		;
	CU_ASSERT_EQUAL(poll(&p, 1, 0), 1); /* the device would send again now */
	CU_ASSERT_EQUAL(o->send(priv, &tx, 1), (int64_t)sizeof(frame));
	o->close(priv);
	fake_cfg_free(plug, cfg);
	fake_host_fini(&fh);
}

int main(void)
{
	CU_pSuite s;
	unsigned fails;

	plug = fake_plugin_open("loopback", &dl);
	if (!plug)
		return 1;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("loopback", NULL, NULL);
	CU_add_test(s, "echo", test_echo);
	CU_add_test(s, "backpressure", test_backpressure);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	fake_plugin_close(dl);
	return fails ? 1 : 0;
}
