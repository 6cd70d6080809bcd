/*
 * svcmap forwarding bench generator: sends small UDP/IPv4 frames out of one
 * interface as fast as it can for a fixed time, through an AF_PACKET socket
 * with PACKET_QDISC_BYPASS and sendmmsg() in batches, so that the frames skip
 * the sender's own IP stack and qdisc: one CPU outruns the node it feeds.
 * When the device refuses frames (the receiving veth's ring is full) it
 * sleeps 20 us instead of spinning: run at a real-time priority (the bench
 * uses chrt), it then takes its CPU only to refill the ring, which lasts
 * hundreds of microseconds at the node's rate, and leaves the rest of that
 * CPU to the other processes on the machine.
 *
 *   fwdgen IFNAME DST_MAC SRC_IP DST_IP DST_PORT FLOWS DURATION_MS [WARMUP_MS]
 *
 * FLOWS frames are built once, differing only in the UDP source port (10000,
 * 10001, ...), with correct IPv4 and UDP checksums; the generator sends them
 * in turn. 18 bytes of payload: a 60-byte frame, the Ethernet minimum.
 * One JSON object on stdout: {"sent":N,"dropped":N,"seconds":S,"pps":R}
 * ("dropped": sendmmsg refused, ENOBUFS; the veth's own drops are counted by
 * the receiving side's device). Counting starts after WARMUP_MS.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PAYLOAD   18
#define FRAME     (14 + 20 + 8 + PAYLOAD)
#define BATCH     64
#define MAX_FLOWS 4096

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t sum16(const void *p, size_t n, uint32_t s)
{
	const uint8_t *b = p;
	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(b[i] << 8 | b[i + 1]);
	if (n & 1)
		s += (uint32_t)(b[n - 1] << 8);
	return s;
}

static uint16_t fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static int parse_mac(const char *s, uint8_t *mac)
{
	return sscanf(s, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &mac[0], &mac[1], &mac[2], &mac[3], &mac[4], &mac[5]) == 6 ?
		       0 :
		       -1;
}

int main(int argc, char **argv)
{
	if (argc < 8) {
		fprintf(stderr, "usage: %s IFNAME DST_MAC SRC_IP DST_IP DST_PORT FLOWS DURATION_MS [WARMUP_MS]\n",
			argv[0]);
		return 2;
	}
	const char *ifname = argv[1];
	uint8_t dmac[6];
	struct in_addr src, dst;
	if (parse_mac(argv[2], dmac) || inet_pton(AF_INET, argv[3], &src) != 1 ||
	    inet_pton(AF_INET, argv[4], &dst) != 1) {
		fprintf(stderr, "bad MAC or address\n");
		return 2;
	}
	int dport = atoi(argv[5]), flows = atoi(argv[6]);
	long duration_ms = atol(argv[7]), warmup_ms = argc > 8 ? atol(argv[8]) : 0;
	if (flows < 1 || flows > MAX_FLOWS || dport < 1 || dport > 65535 || duration_ms < 1) {
		fprintf(stderr, "bad FLOWS (1..%d), DST_PORT or DURATION_MS\n", MAX_FLOWS);
		return 2;
	}

	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0); /* protocol 0: send only, nothing queued for us */
	if (fd < 0) {
		perror("socket(AF_PACKET)");
		return 1;
	}
	struct ifreq ifr = { 0 };
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
	if (ioctl(fd, SIOCGIFINDEX, &ifr) < 0) {
		perror(ifname);
		return 1;
	}
	int ifindex = ifr.ifr_ifindex;
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) {
		perror("SIOCGIFHWADDR");
		return 1;
	}
	prctl(PR_SET_TIMERSLACK, 1000UL); /* the 20 us naps below, not 20 + the default 50 */
	int one = 1;
	if (setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one) < 0)
		perror("PACKET_QDISC_BYPASS");
	struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_ifindex = ifindex, .sll_halen = 6 };
	memcpy(to.sll_addr, dmac, 6);

	static uint8_t frames[MAX_FLOWS][FRAME];
	for (int f = 0; f < flows; f++) {
		uint8_t *p = frames[f];
		memcpy(p, dmac, 6);
		memcpy(p + 6, ifr.ifr_hwaddr.sa_data, 6);
		p[12] = 0x08, p[13] = 0x00;
		struct iphdr *ip = (struct iphdr *)(p + 14);
		ip->version = 4, ip->ihl = 5, ip->ttl = 64, ip->protocol = IPPROTO_UDP;
		ip->tot_len = htons(20 + 8 + PAYLOAD);
		ip->id = htons((uint16_t)f);
		ip->saddr = src.s_addr, ip->daddr = dst.s_addr;
		ip->check = htons(fold(sum16(ip, 20, 0)));
		struct udphdr *udp = (struct udphdr *)(p + 34);
		udp->source = htons((uint16_t)(10000 + f));
		udp->dest = htons((uint16_t)dport);
		udp->len = htons(8 + PAYLOAD);
		memset(p + 42, 'f', PAYLOAD);
		/* Pseudo-header + UDP header and payload. */
		uint32_t s = sum16(&ip->saddr, 8, 0) + IPPROTO_UDP + 8 + PAYLOAD;
		uint16_t c = fold(sum16(udp, 8 + PAYLOAD, s));
		udp->check = htons(c ? c : 0xffff);
	}

	struct iovec iov[BATCH];
	struct mmsghdr msgs[BATCH];
	memset(msgs, 0, sizeof msgs);
	int next = 0;
	uint64_t sent = 0, dropped = 0, counted_from = 0;
	uint64_t t0 = now_ns(), warm_end = t0 + (uint64_t)warmup_ms * 1000000ull,
		 end = warm_end + (uint64_t)duration_ms * 1000000ull;
	int warm = warmup_ms > 0;
	for (;;) {
		for (int i = 0; i < BATCH; i++) {
			iov[i].iov_base = frames[next];
			iov[i].iov_len = FRAME;
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
			msgs[i].msg_hdr.msg_name = &to;
			msgs[i].msg_hdr.msg_namelen = sizeof to;
			if (++next == flows)
				next = 0;
		}
		int n = sendmmsg(fd, msgs, BATCH, 0);
		if (n < 0) {
			if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR) {
				perror("sendmmsg");
				return 1;
			}
			if (!warm)
				dropped += BATCH;
		} else if (!warm) {
			sent += (uint64_t)n;
		}
		if (n < BATCH) {
			struct timespec nap = { 0, 20000 };
			nanosleep(&nap, NULL);
		}
		uint64_t t = now_ns();
		if (warm && t >= warm_end) {
			warm = 0;
			counted_from = t;
		}
		if (t >= end)
			break;
	}
	if (counted_from == 0)
		counted_from = t0;
	double secs = (double)(now_ns() - counted_from) / 1e9;
	printf("{\"sent\":%llu,\"dropped\":%llu,\"seconds\":%.6f,\"pps\":%.1f}\n", (unsigned long long)sent,
	       (unsigned long long)dropped, secs, (double)sent / secs);
	return 0;
}
