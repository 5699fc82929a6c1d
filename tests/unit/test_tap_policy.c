/* SPDX-License-Identifier: Apache-2.0 */
/* The tap backend's egress policy: allow-list parsing, the core's policy group, the plugin on a real tap in a private netns. */
#include <errno.h>
#include <linux/if_ether.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "cunit_main.h"
#include "devices.h"
#include "params.h"
#include "fake_host.h"
#include "loader.h"
#include "policy.h"
#include "tap_policy_support.h"

/* ---- parsing (no privileges needed) ---- */

static int parse(const char *s, struct tp_rule r[2], char *why)
{
	return tp_rule_parse(s, r, why, 256);
}

static void test_parse_good(void)
{
	struct tp_rule r[2];
	char why[256], buf[64];

	CU_ASSERT_EQUAL(parse("10.0.0.1", r, why), 1);
	CU_ASSERT_EQUAL(r[0].addr, 0x0a000001);
	CU_ASSERT_EQUAL(r[0].plen, 32);
	CU_ASSERT_EQUAL(r[0].port, 0);
	CU_ASSERT_EQUAL(r[0].proto, 0);
	CU_ASSERT_EQUAL(parse("192.168.5.0/24", r, why), 1);
	CU_ASSERT_EQUAL(r[0].addr, 0xc0a80500);
	CU_ASSERT_EQUAL(r[0].plen, 24);
	CU_ASSERT_EQUAL(parse("10.0.0.1:8080/tcp", r, why), 1);
	CU_ASSERT_EQUAL(r[0].port, 8080);
	CU_ASSERT_EQUAL(r[0].proto, IPPROTO_TCP);
	CU_ASSERT_EQUAL(parse("10.0.0.53:53/udp", r, why), 1);
	CU_ASSERT_EQUAL(r[0].proto, IPPROTO_UDP);
	/* a port without a protocol: TCP and UDP */
	CU_ASSERT_EQUAL(parse("10.0.0.0/8:443", r, why), 2);
	CU_ASSERT_EQUAL(r[0].proto, IPPROTO_TCP);
	CU_ASSERT_EQUAL(r[1].proto, IPPROTO_UDP);
	CU_ASSERT_EQUAL(r[1].port, 443);
	CU_ASSERT_EQUAL(r[1].plen, 8);
	CU_ASSERT_EQUAL(parse("0.0.0.0/0", r, why), 1);
	CU_ASSERT_EQUAL(r[0].plen, 0);
	CU_ASSERT_EQUAL(parse("255.255.255.255:65535/udp", r, why), 1);
	tp_rule_format(&r[0], buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "255.255.255.255/32:65535/udp");
	parse("10.1.0.0/16", r, why);
	tp_rule_format(&r[0], buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "10.1.0.0/16");
}

static void expect_bad(const char *s, const char *msg)
{
	struct tp_rule r[2];
	char why[256] = "";
	int ret = parse(s, r, why);

	CU_ASSERT_EQUAL(ret, -EINVAL);
	if (!strstr(why, msg) || !strstr(why, s))
		printf("\n  '%s': got \"%s\", expected \"%s\" ", s, why, msg);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, msg));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, s)); /* the message quotes the entry */
}

static void test_parse_errors(void)
{
	expect_bad("", "expected an IPv4 address");
	expect_bad("abc", "expected an IPv4 address");
	expect_bad("10.0.0", "expected an IPv4 address");
	expect_bad("10.0.0.256", "each part 0..255");
	expect_bad("010.0.0.1", "expected an IPv4 address");
	expect_bad("10.0.0.1.5", "expected CIDR[:port");
	expect_bad("10.0.0.0/33", "prefix length is more than 32");
	expect_bad("10.0.0.0/", "expected a prefix length");
	expect_bad("10.0.0.0/x", "expected a prefix length");
	expect_bad("10.0.0.1/8", "host bits");
	expect_bad("10.0.0.1:0", "port must be 1..65535");
	expect_bad("10.0.0.1:65536", "port must be 1..65535");
	expect_bad("10.0.0.1:", "port must be 1..65535");
	expect_bad("10.0.0.1:-1", "port must be 1..65535");
	expect_bad("10.0.0.1:80/icmp", "unknown protocol");
	expect_bad("10.0.0.1:80/", "unknown protocol");
	expect_bad("10.0.0.1:80/tcpx", "unknown protocol");
	expect_bad("10.0.0.1 ", "expected CIDR[:port");
	expect_bad("10.0.0.1/24/tcp", "host bits");
}

static void test_rules_add_del(void)
{
	struct tp_rules rs = { 0 };
	char why[256];

	CU_ASSERT_EQUAL(tp_rules_add(&rs, "10.0.0.1:53", why, sizeof(why)), 2);
	CU_ASSERT_EQUAL(tp_rules_add(&rs, "10.0.0.1:53/udp", why, sizeof(why)), 0); /* already in */
	CU_ASSERT_EQUAL(tp_rules_add(&rs, "10.0.0.0/24", why, sizeof(why)), 1);
	CU_ASSERT_EQUAL(rs.n, 3);
	CU_ASSERT_EQUAL(tp_rules_add(&rs, "10.0.0.0/24:x", why, sizeof(why)), -EINVAL);
	CU_ASSERT_EQUAL(rs.n, 3);
	CU_ASSERT_EQUAL(tp_rules_del(&rs, "10.0.0.1:53/tcp", why, sizeof(why)), 1);
	CU_ASSERT_EQUAL(rs.n, 2);
	/* no hole can be cut into a wider entry */
	CU_ASSERT_EQUAL(tp_rules_del(&rs, "10.0.0.7", why, sizeof(why)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "not in the allow list"));
	CU_ASSERT_EQUAL(tp_rules_del(&rs, "10.0.0.1:53", why, sizeof(why)), 1); /* the udp one left */
	CU_ASSERT_EQUAL(rs.n, 1);
	tp_rules_free(&rs);
	CU_ASSERT_EQUAL(rs.n, 0);
}

static void test_normalise(void)
{
	static const char *const in[] = { "10.0.0.0/8:80/tcp", "10.1.0.0/16:443/tcp",
					  "10.1.2.0/24", "10.1.2.0/24:9/udp", "192.168.5.0/24:53",
					  "10.1.0.0/16:80/tcp", NULL };
	struct tp_rules rs = { 0 };
	struct tp_entry *e;
	unsigned n;
	char why[256];

	for (unsigned i = 0; in[i]; i++)
		CU_ASSERT(tp_rules_add(&rs, in[i], why, sizeof(why)) >= 0);
	CU_ASSERT_EQUAL(tp_normalise(&rs, &e, &n), 0);
	CU_ASSERT_EQUAL_FATAL(n, 4);
	/* sorted by address, then prefix */
	CU_ASSERT_EQUAL(e[0].addr, 0x0a000000);
	CU_ASSERT_EQUAL(e[0].plen, 8);
	CU_ASSERT_FALSE(e[0].any);
	CU_ASSERT_EQUAL(e[0].n_ports, 1);
	CU_ASSERT_EQUAL(e[0].ports[0].port, 80);
	/* 10.1.0.0/16 inherits 80/tcp from /8 (once, though both name it) */
	CU_ASSERT_EQUAL(e[1].plen, 16);
	CU_ASSERT_EQUAL_FATAL(e[1].n_ports, 2);
	CU_ASSERT_EQUAL(e[1].ports[0].port, 80);
	CU_ASSERT_EQUAL(e[1].ports[1].port, 443);
	/* 10.1.2.0/24 allows everything: its port rules fold into that */
	CU_ASSERT_EQUAL(e[2].plen, 24);
	CU_ASSERT_TRUE(e[2].any);
	CU_ASSERT_EQUAL(e[2].n_ports, 0);
	CU_ASSERT_EQUAL(e[3].addr, 0xc0a80500);
	CU_ASSERT_EQUAL_FATAL(e[3].n_ports, 2);
	CU_ASSERT_EQUAL(e[3].ports[0].proto, IPPROTO_TCP);
	CU_ASSERT_EQUAL(e[3].ports[1].proto, IPPROTO_UDP);
	tp_entries_free(e, n);
	CU_ASSERT_TRUE(tp_covers(0x0a000000, 8, 0x0a010200, 24));
	CU_ASSERT_FALSE(tp_covers(0x0a010200, 24, 0x0a000000, 8));
	CU_ASSERT_TRUE(tp_covers(0, 0, 0xffffffff, 32));
	tp_rules_free(&rs);
}

/* ---- the core: a nested `policy` group and a string list (ABI 1.3) ---- */

/* Same layout as tap.c's struct tap_cfg (the plugin's params say where). */
struct cfg_view {
	const char *ifname;
	bool create;
	const char *policy_default;
	const char *const *policy_allow;
	bool policy_arp, policy_dhcp, policy_required;
	const char *policy_program, *policy_pin;
	const char *policy_ip, *policy_mac;
};

static int fill(const struct plugin *p, const char *text, struct cfg_view *cfg, char *err,
		size_t len)
{
	struct arena ar = { 0 };
	static const char *const skip[] = { "type", NULL };
	struct params_ctx ctx = { .ar = &ar, .inst = "tap[net0]", .plugin = "tap",
				  .where = "tap.cfg", .skip = skip };
	struct cnode *root;
	int ret;

	if (config_load_text(&ar, text, "tap.cfg", &root, err, len)) {
		arena_free(&ar);
		return -100;
	}
	memset(cfg, 0, p->d->cfg_size);
	ret = params_fill(p->params, p->d->n_params, &ctx, cnode_get(root, "b"), cfg, err, len);
	if (!ret) { /* copy out what the checks below read, before strs go */
		static char def[16], a0[32], a1[32];
		static const char *allow[3];

		snprintf(def, sizeof(def), "%s", cfg->policy_default ? cfg->policy_default : "(null)");
		cfg->policy_default = cfg->policy_default ? def : NULL;
		if (cfg->policy_allow) {
			allow[0] = allow[1] = allow[2] = NULL;
			if (cfg->policy_allow[0])
				allow[0] = strcpy(a0, cfg->policy_allow[0]);
			if (allow[0] && cfg->policy_allow[1])
				allow[1] = strcpy(a1, cfg->policy_allow[1]);
			cfg->policy_allow = allow;
		}
	}
	arena_free(&ar);
	return ret;
}

static void test_core_nested_group(void)
{
	struct plugin *p = NULL;
	struct cfg_view cfg;
	char path[4096], err[512];

	CU_ASSERT_EQUAL_FATAL(fake_plugin_path("tap", path, sizeof(path)), 0);
	if (loader_open(path, &p, err, sizeof(err))) {
		printf("\n  %s ", err);
		CU_FAIL_FATAL("loader_open tap.so");
	}
	CU_ASSERT_EQUAL_FATAL(p->d->cfg_size, sizeof(struct cfg_view));
	/* no policy group: every policy.* slot stays zero */
	CU_ASSERT_EQUAL(fill(p, "b = { type = \"tap\"; ifname = \"tap0\"; };", &cfg, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NULL(cfg.policy_default);
	CU_ASSERT_PTR_NULL(cfg.policy_allow);
	CU_ASSERT_FALSE(cfg.policy_required);
	/* with it: defaults apply inside, lists arrive NULL-terminated */
	CU_ASSERT_EQUAL(fill(p, "b = { ifname = \"tap0\";\n policy = { default = \"deny\";\n"
			     " allow = [ \"10.0.0.1:80/tcp\", \"10.0.0.0/24\" ]; }; };",
			     &cfg, err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(cfg.policy_default, "deny");
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg.policy_allow);
	CU_ASSERT_STRING_EQUAL(cfg.policy_allow[0], "10.0.0.1:80/tcp");
	CU_ASSERT_STRING_EQUAL(cfg.policy_allow[1], "10.0.0.0/24");
	CU_ASSERT_PTR_NULL(cfg.policy_allow[2]);
	CU_ASSERT_TRUE(cfg.policy_required);
	CU_ASSERT_TRUE(cfg.policy_arp);
	CU_ASSERT_FALSE(cfg.policy_dhcp);
	/* a list given as a libconfig list works too; an empty one is empty */
	CU_ASSERT_EQUAL(fill(p, "b = { policy = { default = \"deny\"; allow = ( \"10.0.0.1\" ); }; };",
			     &cfg, err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(cfg.policy_allow[0], "10.0.0.1");
	CU_ASSERT_EQUAL(fill(p, "b = { policy = { default = \"deny\"; allow = [ ]; }; };",
			     &cfg, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NULL(cfg.policy_allow[0]);
	/* errors name the line */
	CU_ASSERT_EQUAL(fill(p, "b = {\n policy = {\n allow = [ ]; }; };", &cfg, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "tap.cfg:2: tap[net0]: 'policy.default' is required"));
	CU_ASSERT_EQUAL(fill(p, "b = {\n policy = { default = \"deny\";\n alow = [ ]; }; };", &cfg, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "tap.cfg:3: tap[net0]: unknown parameter 'policy.alow'; the group 'policy' takes default, allow, arp, dhcp, required, program, pin"));
	CU_ASSERT_EQUAL(fill(p, "b = {\n policy = \"deny\"; };", &cfg, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "tap.cfg:2: tap[net0]: 'policy' must be a group"));
	CU_ASSERT_EQUAL(fill(p, "b = { policy = { default = \"deny\";\n allow = [ 1, 2 ]; }; };", &cfg, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "tap.cfg:2: tap[net0]: 'policy.allow' must be a list of strings"));
	CU_ASSERT_EQUAL(fill(p, "b = { policy = { default = \"deny\";\n allow = \"10.0.0.1\"; }; };", &cfg, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "'policy.allow' must be a list of strings"));
	CU_ASSERT_EQUAL(fill(p, "b = { policy = { default = \"deny\";\n arp = 1; }; };", &cfg, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "tap.cfg:2: tap[net0]: 'policy.arp' must be true or false"));
	loader_close(p);
}

/* ---- root: the plugin on a real tap, in a network namespace of its own ---- */

static const struct cub_plugin *plug;
static void *plug_dl;

static bool need_tap(void)
{
	static int ns = -1;

	if (!need_bpf())
		return false;
	if (ns < 0) {
		ns = !unshare(CLONE_NEWNET) && !access("/dev/net/tun", R_OK | W_OK);
		if (!ns) {
			printf("\n  skipped: no network namespace or /dev/net/tun here ");
			if (getenv("CUBICLE_E2E_REQUIRE") && !strcmp(getenv("CUBICLE_E2E_REQUIRE"), "1"))
				CU_FAIL("tap tests required but cannot run");
		}
	}
	return ns == 1;
}

static int open_tap(struct fake_host *fh, const char *const *kv, void **priv)
{
	const struct cub_net_ops *ops = plug->ops;
	void *cfg = fake_cfg_new(plug, kv);
	int ret;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	ret = ops->open(fake_inst(fh), &fh->ops, cfg, priv);
	fake_cfg_free(plug, cfg); /* the plugin keeps no pointer into cfg past open */
	return ret;
}

/* Config errors come before anything needing root. */
static void test_plugin_config_errors(void)
{
	static const char *const bad_cidr[] = { "ifname", "t0", "policy.default", "deny",
						"policy.allow", "10.0.0.1:80/tcp,10.0.0.0/33", NULL };
	static const char *const bad_default[] = { "ifname", "t0", "policy.default", "allow", NULL };
	static const char *const no_name[] = { NULL };
	static const char *const long_name[] = { "ifname", "a-name-of-twenty-chars", NULL };
	static const char *const bad_ip[] = { "ifname", "t0", "policy.default", "deny",
					      "policy.ip", "10.0.2", NULL };
	static const char *const mcast_ip[] = { "ifname", "t0", "policy.default", "deny",
						"policy.ip", "224.0.0.1", NULL };
	static const char *const bad_mac[] = { "ifname", "t0", "policy.default", "deny",
					       "policy.mac", "01:00:5e:00:00:01", NULL };
	struct fake_host fh;
	void *priv = NULL;

	plug = fake_plugin_open("tap", &plug_dl);
	CU_ASSERT_PTR_NOT_NULL_FATAL(plug);
	CU_ASSERT_EQUAL(plug->kind, CUB_KIND_NET);
	CU_ASSERT_STRING_EQUAL(plug->name, "tap");
	CU_ASSERT_PTR_NOT_NULL(fake_method_find(plug, "policy_stats"));
	CU_ASSERT_STRING_EQUAL(fake_method_find(plug, "policy_allow")->sig, "s");
	CU_ASSERT_STRING_EQUAL(fake_method_find(plug, "policy_deny")->sig, "s");
	fake_host_init(&fh);
	CU_ASSERT_EQUAL(open_tap(&fh, bad_cidr, &priv), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "policy.allow[1]: '10.0.0.0/33': prefix length is more than 32"));
	CU_ASSERT_EQUAL(open_tap(&fh, bad_default, &priv), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "only \"deny\""));
	CU_ASSERT_EQUAL(open_tap(&fh, no_name, &priv), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "ifname must name an existing tap"));
	CU_ASSERT_EQUAL(open_tap(&fh, long_name, &priv), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "longer than 15"));
	CU_ASSERT_EQUAL(open_tap(&fh, bad_ip, &priv), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "policy.ip = \"10.0.2\": expected an IPv4 address"));
	CU_ASSERT_EQUAL(open_tap(&fh, mcast_ip, &priv), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "not a unicast address"));
	CU_ASSERT_EQUAL(open_tap(&fh, bad_mac, &priv), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "policy.mac = \"01:00:5e:00:00:01\": expected six hex octets"));
	fake_host_fini(&fh);
}

static int call_s(const char *name, void *priv, struct cub_reply *r, const char *arg)
{
	const struct cub_method *m = fake_method_find(plug, name);

	memset(r, 0, sizeof(*r));
	return ((int (*)(void *, struct cub_reply *, const char *))m->fn)(priv, r, arg);
}

/* The counter named name in a policy_stats reply. */
static long long stat_of(void *priv, const char *name)
{
	const struct cub_method *m = fake_method_find(plug, "policy_stats");
	struct cub_reply r = { 0 };
	char key[32];
	const char *p;

	if (((int (*)(void *, struct cub_reply *))m->fn)(priv, &r))
		return -1;
	snprintf(key, sizeof(key), "%s ", name);
	p = strstr(r.text, key);
	return p ? atoll(p + strlen(key)) : -1;
}

static void send_tcp(void *priv, const char *dst, uint16_t port, bool vnet)
{
	const struct cub_net_ops *ops = plug->ops;
	uint8_t hdr[CUB_NET_HDR_LEN] = { 0 };
	struct pkt p;
	struct iovec v[2] = { { hdr, sizeof(hdr) }, { p.b, 0 } };

	tcp(&p, dst, port);
	v[1].iov_len = p.len;
	CU_ASSERT_EQUAL(ops->send(priv, vnet ? v : v + 1, vnet ? 2 : 1), (int64_t)(p.len + (vnet ? sizeof(hdr) : 0)));
}

/* Send p as it is, behind a zeroed vnet header. */
static void send_pkt(void *priv, const struct pkt *p)
{
	const struct cub_net_ops *ops = plug->ops;
	uint8_t hdr[CUB_NET_HDR_LEN] = { 0 };
	struct iovec v[2] = { { hdr, sizeof(hdr) }, { (void *)p->b, p->len } };

	CU_ASSERT_EQUAL(ops->send(priv, v, 2), (int64_t)(p->len + sizeof(hdr)));
}

static void send_short(void *priv, unsigned len)
{
	const struct cub_net_ops *ops = plug->ops;
	uint8_t hdr[CUB_NET_HDR_LEN] = { 0 };
	struct pkt p;
	struct iovec v[2] = { { hdr, sizeof(hdr) }, { p.b, len } };

	tcp(&p, "10.0.2.1", 80);
	CU_ASSERT_EQUAL(ops->send(priv, v, 2), (int64_t)(len + sizeof(hdr)));
}

static void test_plugin_tap(void)
{
	static const char *const kv[] = { "ifname", "cubt0", "create", "true",
					  "policy.default", "deny", "policy.allow", "10.0.2.1:80/tcp",
					  "policy.ip", "10.0.2.15", NULL };
	const struct cub_net_ops *ops;
	struct cub_net_info info;
	struct cub_net_stats st;
	struct cub_reply r;
	struct fake_host fh;
	void *priv = NULL;
	uint8_t buf[2048];
	struct iovec v = { buf, sizeof(buf) };

	if (!need_tap() || !plug)
		return;
	ops = plug->ops;
	fake_host_init(&fh);
	if (open_tap(&fh, kv, &priv)) {
		printf("\n  open: %s ", fh.fail_msg);
		CU_FAIL_FATAL("tap open");
	}
	CU_ASSERT_NOT_EQUAL(if_nametoindex("cubt0"), 0);
	CU_ASSERT_TRUE(fake_log_has(&fh, "egress policy attached"));
	ops->info(priv, &info);
	CU_ASSERT_TRUE(info.vnet_hdr);
	CU_ASSERT(info.rx_fd >= 0);
	CU_ASSERT_EQUAL(info.mtu, 1500);
	{
		/* Nothing of ours waiting: no blocking. The kernel may have
		 * sent its own frames on the new link (IPv6 autoconfiguration):
		 * taken, they end, and recv then answers 0 at once. */
		int64_t n = 0;

		for (int i = 0; i < 32 && (n = ops->recv(priv, &v, 1)) > 0; i++)
			;
		CU_ASSERT_EQUAL(n, 0);
	}
	CU_ASSERT_FALSE(info.has_mac); /* no policy.mac: the device chooses */
	CU_ASSERT_EQUAL(ops->set_vnet_hdr(priv, true), 0);
	CU_ASSERT_EQUAL(ops->set_offloads(priv, info.offloads), 0);
	/* until the device names the guest's MAC, nothing passes */
	send_tcp(priv, "10.0.2.1", 80, true);
	CU_ASSERT_EQUAL(stat_of(priv, "source_mac"), 1);
	CU_ASSERT_EQUAL(stat_of(priv, "passed"), 0);
	CU_ASSERT_EQUAL(ops->set_mac(priv, guest_mac), 0);
	CU_ASSERT_TRUE(fake_log_has(&fh, "frames pass only from the guest's MAC 52:54:00:12:34:56"));
	/* frames written to the tap meet the filter on its ingress */
	send_tcp(priv, "10.0.3.1", 80, true);
	send_tcp(priv, "10.0.2.1", 80, true);
	send_tcp(priv, "10.0.2.1", 81, true);
	CU_ASSERT_EQUAL(stat_of(priv, "address"), 1);
	CU_ASSERT_EQUAL(stat_of(priv, "passed"), 1);
	CU_ASSERT_EQUAL(stat_of(priv, "port"), 1);
	/* IPv4 frames cut short, which BPF_PROG_TEST_RUN cannot carry */
	send_short(priv, ETH_HLEN);
	send_short(priv, ETH_HLEN + 12);
	CU_ASSERT_EQUAL(stat_of(priv, "short"), 2);
	ops->stats(priv, &st);
	CU_ASSERT_EQUAL(st.tx_packets, 6);
	CU_ASSERT_EQUAL(st.tx_dropped, 5);
	/*
	 * Tagged frames around an allowed packet. The kernel moves the outer
	 * tag into the skb's metadata before tc ingress, so these exercise
	 * vlan_present; the one from another MAC shows it (the data path
	 * checks the source MAC first and would count source_mac).
	 */
	{
		struct pkt p;

		tcp(&p, "10.0.2.1", 80);
		tag(&p, ETH_P_8021Q, 0);
		send_pkt(priv, &p);
		tcp(&p, "10.0.2.1", 80);
		tag(&p, ETH_P_8021Q, 5);
		send_pkt(priv, &p);
		memcpy(p.b + 6, other_mac, 6);
		send_pkt(priv, &p);
		CU_ASSERT_EQUAL(stat_of(priv, "vlan"), 3);
		CU_ASSERT_EQUAL(stat_of(priv, "source_mac"), 1);
		tcp(&p, "10.0.2.1", 80);
		tag(&p, ETH_P_8021Q, 5);
		tag(&p, ETH_P_8021AD, 7);
		send_pkt(priv, &p);
		CU_ASSERT_EQUAL(stat_of(priv, "vlan"), 4);
		/* spoofed sources (policy.ip is 10.0.2.15) */
		ip4(&p, IPPROTO_TCP, "10.0.2.99", "10.0.2.1", 40000, 80, 0x4000, 5, 20);
		send_pkt(priv, &p);
		CU_ASSERT_EQUAL(stat_of(priv, "source_ip"), 1);
		tcp(&p, "10.0.2.1", 80);
		memcpy(p.b + 6, other_mac, 6);
		send_pkt(priv, &p);
		CU_ASSERT_EQUAL(stat_of(priv, "source_mac"), 2);
		arp_pkt(&p, 2, guest_mac, "10.0.2.1", "10.0.2.2");
		send_pkt(priv, &p);
		CU_ASSERT_EQUAL(stat_of(priv, "arp_spoof"), 1);
		arp_pkt(&p, 1, guest_mac, "10.0.2.15", "10.0.2.1");
		send_pkt(priv, &p);
		CU_ASSERT_EQUAL(stat_of(priv, "passed"), 2);
		CU_ASSERT_EQUAL(stat_of(priv, "address"), 1);
	}
	/* run-time changes through the methods */
	CU_ASSERT_EQUAL(call_s("policy_allow", priv, &r, "10.0.3.1"), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.text, "allowed 10.0.3.1"));
	CU_ASSERT_EQUAL(ops->set_vnet_hdr(priv, false), 0); /* plain frames work too */
	send_tcp(priv, "10.0.3.1", 80, false);
	CU_ASSERT_EQUAL(stat_of(priv, "passed"), 3);
	CU_ASSERT_EQUAL(call_s("policy_deny", priv, &r, "10.0.3.1"), 0);
	send_tcp(priv, "10.0.3.1", 80, false);
	CU_ASSERT_EQUAL(stat_of(priv, "address"), 2);
	CU_ASSERT_EQUAL(call_s("policy_deny", priv, &r, "10.0.9.9"), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.text, "not in the allow list"));
	CU_ASSERT_EQUAL(call_s("policy_allow", priv, &r, "10.0.3.1/40"), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.text, "prefix length"));
	/* a second VM on the same tap is refused, and leaves the filter be */
	{
		static const char *const kv2[] = { "ifname", "cubt0", "policy.default", "deny", NULL };
		struct fake_host fh2;
		void *priv2 = NULL;

		fake_host_init(&fh2);
		CU_ASSERT_EQUAL(open_tap(&fh2, kv2, &priv2), -EBUSY);
		CU_ASSERT_PTR_NOT_NULL(strstr(fh2.fail_msg, "another process holds it"));
		fake_host_fini(&fh2);
		send_tcp(priv, "10.0.3.1", 80, false);
		CU_ASSERT_EQUAL(stat_of(priv, "address"), 3);
	}
	ops->close(priv);
	CU_ASSERT_TRUE(fake_log_has(&fh, "policy: passed 3; dropped:"));
	CU_ASSERT_TRUE(fake_log_has(&fh, " vlan 4 source_mac 2 source_ip 1 arp_spoof 1"));
	CU_ASSERT_EQUAL(if_nametoindex("cubt0"), 0); /* a created tap goes with us */
	fake_host_fini(&fh);
}

/* policy.mac: the filter knows the guest from open on, the device is told
 * through info, and a device that picks another MAC is refused. */
static void test_plugin_policy_mac(void)
{
	static const char *const kv[] = { "ifname", "cubt2", "create", "true",
					  "policy.default", "deny", "policy.allow", "10.0.2.1:80/tcp",
					  "policy.mac", "52:54:00:12:34:56", NULL };
	const struct cub_net_ops *ops;
	struct cub_net_info info;
	struct fake_host fh;
	void *priv = NULL;

	if (!need_tap() || !plug)
		return;
	ops = plug->ops;
	fake_host_init(&fh);
	if (open_tap(&fh, kv, &priv)) {
		printf("\n  open: %s ", fh.fail_msg);
		CU_FAIL_FATAL("tap open");
	}
	ops->info(priv, &info);
	CU_ASSERT_TRUE(info.has_mac);
	CU_ASSERT_EQUAL(memcmp(info.mac, guest_mac, 6), 0);
	send_tcp(priv, "10.0.2.1", 80, false);
	CU_ASSERT_EQUAL(stat_of(priv, "passed"), 1);
	CU_ASSERT_EQUAL(ops->set_mac(priv, other_mac), -EINVAL);
	CU_ASSERT_TRUE(fake_log_has(&fh, "the device gives the guest MAC 52:54:00:12:34:57 but policy.mac is 52:54:00:12:34:56"));
	send_tcp(priv, "10.0.2.1", 80, false); /* still the configured one */
	CU_ASSERT_EQUAL(stat_of(priv, "passed"), 2);
	CU_ASSERT_EQUAL(ops->set_mac(priv, guest_mac), 0);
	ops->close(priv);
	fake_host_fini(&fh);
}

/* Fail closed: a policy that cannot be loaded means no tap, unless
 * policy.required = false. */
static void test_plugin_fail_closed(void)
{
	static const char *const kv[] = { "ifname", "cubt1", "create", "true",
					  "policy.default", "deny",
					  "policy.program", "/nonexistent.o", NULL };
	static const char *const kv_open[] = { "ifname", "cubt1", "create", "true",
					       "policy.default", "deny", "policy.required", "false",
					       "policy.program", "/nonexistent.o", NULL };
	static const char *const kv_missing[] = { "ifname", "cubt-none", "policy.default", "deny",
						  NULL };
	struct fake_host fh;
	struct cub_reply r;
	void *priv = NULL;

	if (!need_tap() || !plug)
		return;
	fake_host_init(&fh);
	CU_ASSERT_EQUAL(open_tap(&fh, kv, &priv), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "cannot be enforced, so the VM does not start"));
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "/nonexistent.o: No such file or directory"));
	CU_ASSERT_EQUAL(if_nametoindex("cubt1"), 0);
	CU_ASSERT_EQUAL(open_tap(&fh, kv_open, &priv), 0);
	CU_ASSERT_TRUE(fake_log_has(&fh, "is NOT filtered"));
	CU_ASSERT_EQUAL(call_s("policy_allow", priv, &r, "10.0.0.1"), -ENOENT);
	CU_ASSERT_NOT_EQUAL(if_nametoindex("cubt1"), 0);
	((const struct cub_net_ops *)plug->ops)->close(priv);
	CU_ASSERT_EQUAL(open_tap(&fh, kv_missing, &priv), -ENODEV);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "scripts/tap-setup.sh"));
	fake_host_fini(&fh);
	fake_plugin_close(plug_dl);
	plug = NULL;
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "allow entries that parse", test_parse_good },
		{ "allow entries that do not, and why", test_parse_errors },
		{ "allow list add and remove", test_rules_add_del },
		{ "normalisation: closure over covering prefixes", test_normalise },
		{ "core: a nested policy group and string lists", test_core_nested_group },
		{ "plugin: config errors", test_plugin_config_errors },
		{ "plugin: a real tap with the policy attached", test_plugin_tap },
		{ "plugin: policy.mac", test_plugin_policy_mac },
		{ "plugin: fail closed", test_plugin_fail_closed },
		{ NULL, NULL },
	};

	return cu_run("tap policy", tests);
}
