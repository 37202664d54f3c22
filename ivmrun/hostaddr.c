/* Host names and addresses for real clusters, shared by ivmrun (is the first
 * host this machine?) and ivm-boot (which entry of the host list is this
 * machine, and at which address do the others reach it?). */
#include "ivmrun.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"

/* Ranks of a resolved address, best first. */
enum {
    IVMRUN_ADDR_V4,          /* IPv4, not loopback */
    IVMRUN_ADDR_V6,          /* IPv6, neither loopback nor link-local */
    IVMRUN_ADDR_V4_LOOPBACK, /* 127.0.0.0/8 */
    IVMRUN_ADDR_V6_LOOPBACK, /* ::1 */
    IVMRUN_ADDR_UNUSABLE     /* link-local IPv6 (needs a scope), other families */
};

static int ivmrun_addr_rank(const struct sockaddr *sa)
{
    const struct in6_addr *a6;
    uint32_t a4;

    if (sa->sa_family == AF_INET) {
        a4 = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
        return (a4 >> 24) == 127 ? IVMRUN_ADDR_V4_LOOPBACK : IVMRUN_ADDR_V4;
    }
    if (sa->sa_family == AF_INET6) {
        a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a6)) {
            return IVMRUN_ADDR_V6_LOOPBACK;
        }
        if (IN6_IS_ADDR_V4MAPPED(a6)) {
            return a6->s6_addr[12] == 127 ? IVMRUN_ADDR_V4_LOOPBACK : IVMRUN_ADDR_V6;
        }
        return IN6_IS_ADDR_LINKLOCAL(a6) ? IVMRUN_ADDR_UNUSABLE : IVMRUN_ADDR_V6;
    }
    return IVMRUN_ADDR_UNUSABLE;
}

static int ivmrun_addr_is_loopback(const struct sockaddr *sa)
{
    int rank = ivmrun_addr_rank(sa);

    return rank == IVMRUN_ADDR_V4_LOOPBACK || rank == IVMRUN_ADDR_V6_LOOPBACK;
}

/* Same family and address (ports ignored). */
static int ivmrun_addr_equal(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family) {
        return 0;
    }
    if (a->sa_family == AF_INET) {
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    }
    if (a->sa_family == AF_INET6) {
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr,
                      sizeof(struct in6_addr)) == 0;
    }
    return 0;
}

/* Numeric text of an address, without port or scope. */
static void ivmrun_addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
    const void *src = (sa->sa_family == AF_INET)
                          ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                          : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;

    if (inet_ntop(sa->sa_family, src, buf, (socklen_t)len) == NULL) {
        snprintf(buf, len, "?");
    }
}

/* The names match: equal, or equal up to the domain when one has none. */
static int ivmrun_host_name_match(const char *a, const char *b)
{
    size_t la = strcspn(a, "."), lb = strcspn(b, ".");

    if (strcasecmp(a, b) == 0) {
        return 1;
    }
    if ((a[la] == '\0' || b[lb] == '\0') && la == lb && strncasecmp(a, b, la) == 0) {
        return 1;
    }
    return 0;
}

int ivmrun_host_is_local(const char *name)
{
    struct addrinfo hints, *res = NULL, *ai;
    struct ifaddrs *ifs = NULL, *ifa;
    char self[256];
    int local = 0;

    if (strcasecmp(name, "localhost") == 0) {
        return 1;
    }
    if (gethostname(self, sizeof(self)) == 0) {
        self[sizeof(self) - 1] = '\0';
        if (ivmrun_host_name_match(name, self)) {
            return 1;
        }
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family   = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(name, NULL, &hints, &res) != 0) {
        return 0;
    }
    if (getifaddrs(&ifs) != 0) {
        ifs = NULL;
    }
    for (ai = res; ai != NULL && !local; ai = ai->ai_next) {
        if (ivmrun_addr_is_loopback(ai->ai_addr)) {
            local = 1;
            break;
        }
        for (ifa = ifs; ifa != NULL; ifa = ifa->ifa_next) {
            if (ifa->ifa_addr != NULL && ivmrun_addr_equal(ai->ai_addr, ifa->ifa_addr)) {
                local = 1;
                break;
            }
        }
    }
    if (ifs != NULL) {
        freeifaddrs(ifs);
    }
    freeaddrinfo(res);
    return local;
}

/* The first IPv4 address of an interface that is up and not loopback. */
static int ivmrun_host_iface_addr(char *buf, size_t len, char *ifname, size_t ifname_len)
{
    struct ifaddrs *ifs, *ifa;
    int found = 0;

    if (getifaddrs(&ifs) != 0) {
        ivm_error("cannot list the network interfaces: %m");
        return -1;
    }
    for (ifa = ifs; ifa != NULL; ifa = ifa->ifa_next) {
        if (ifa->ifa_addr != NULL && ifa->ifa_addr->sa_family == AF_INET &&
            (ifa->ifa_flags & IFF_UP) && !(ifa->ifa_flags & IFF_LOOPBACK) &&
            ivmrun_addr_rank(ifa->ifa_addr) == IVMRUN_ADDR_V4) {
            ivmrun_addr_text(ifa->ifa_addr, buf, len);
            snprintf(ifname, ifname_len, "%s", ifa->ifa_name);
            found = 1;
            break;
        }
    }
    freeifaddrs(ifs);
    return found ? 0 : -1;
}

int ivmrun_host_addr(const char *name, int external, char *buf, size_t len)
{
    struct addrinfo hints, *res = NULL, *ai;
    const struct sockaddr *best = NULL;
    char self[256], ifname[IF_NAMESIZE + 1];
    int rank, best_rank = IVMRUN_ADDR_UNUSABLE, err;

    if (name == NULL) {
        if (gethostname(self, sizeof(self)) != 0) {
            ivm_error("cannot get this host's name: %m");
            return -1;
        }
        self[sizeof(self) - 1] = '\0';
        name = self;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family   = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    err = getaddrinfo(name, NULL, &hints, &res);
    if (err != 0) {
        res = NULL;
        if (!external) {
            ivm_error("cannot resolve the host name '%s': %s", name, gai_strerror(err));
            return -1;
        }
        ivm_info("cannot resolve the host name '%s' (%s); looking at the interfaces",
                 name, gai_strerror(err));
    }
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        rank = ivmrun_addr_rank(ai->ai_addr);
        if (rank < best_rank) {
            best_rank = rank;
            best      = ai->ai_addr;
        }
    }
    if (best != NULL && (best_rank <= IVMRUN_ADDR_V6 || !external)) {
        ivmrun_addr_text(best, buf, len);
        freeaddrinfo(res);
        return 0;
    }
    if (res != NULL) {
        freeaddrinfo(res);
    }
    /* Only loopback (as /etc/hosts often maps the host's own name), but the
     * other nodes are elsewhere: an interface's address reaches further. */
    if (!external || ivmrun_host_iface_addr(buf, len, ifname, sizeof(ifname)) != 0) {
        ivm_error("'%s' has no address that other hosts can reach, and no network "
                  "interface other than loopback is up", name);
        return -1;
    }
    ivm_info("'%s' resolves to loopback only; using %s (interface %s) for the other "
             "nodes", name, buf, ifname);
    return 0;
}
