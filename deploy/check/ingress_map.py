"""Checks the nginx `map` of deploy/ingress-nginx/controller-config.yaml that names a client for the
ingress's per-client connection cap: every IPv6 address, written as nginx writes it (compressed: the
first longest run of two or more zero groups as `::`, lower-case hex, no leading zeros), must get the
key of its /64 and of nothing else; an IPv4 address (also IPv4-mapped) its own key. nginx tries the
regular expressions of a map in order and takes the first match; so does this check."""

import ipaddress
import random
import re
import sys

import yaml


def rules(snippet):
    out = []
    for line in snippet.splitlines():
        m = re.match(r'\s*"~(.*)"\s+(\S+);\s*$', line)
        if m:
            pattern = m.group(1).replace("(?<", "(?P<")
            out.append((re.compile(pattern), m.group(2).strip('"')))
    return out


def key(rules, text):
    for pattern, value in rules:
        m = pattern.search(text)
        if m:
            if value == "$remote_addr":
                return text
            return re.sub(r"\$(\w+)", lambda v: m.group(v.group(1)), value)
    return text


def nginx_text(address):
    # Python's compressed form is nginx's: the first longest run of two or more zero groups is `::`.
    return ipaddress.IPv6Address(address).compressed


def main():
    path = sys.argv[1]
    config = yaml.safe_load(open(path))
    snippet = config["data"]["http-snippet"]
    assert config["data"]["limit-conn-zone-variable"] == "$draughts_client", "the key is not used"
    table = rules(snippet)
    assert table, "no map rules read"
    rng = random.Random(7)
    group = lambda: rng.choice([0, 0, 0, rng.randrange(1, 1 << 16)])  # noqa: E731
    networks = set()
    keys_of = {}
    problems = []
    for _ in range(20_000):
        net = tuple(group() for _ in range(4))
        host = tuple(group() for _ in range(4))
        value = 0
        for g in net + host:
            value = value << 16 | g
        text = nginx_text(value)
        k = key(table, text)
        networks.add(net)
        if keys_of.setdefault(k, net) != net:
            problems.append(f"{text}: key {k} is also the key of {keys_of[k]}")
        expected = {key(table, nginx_text(sum(g << (16 * (7 - i)) for i, g in enumerate(net + h))))
                    for h in [(0, 0, 0, 0), (0, 0, 0, 1), (1, 0, 0, 0), (0xffff,) * 4]}
        if expected != {k}:
            problems.append(f"{text}: key {k}, others of its /64 {sorted(expected)}")
    if len(set(keys_of.values())) != len(networks):
        problems.append("two /64s share a key")
    for text in ["203.0.113.7", "::ffff:203.0.113.7"]:
        if key(table, text) != text:
            problems.append(f"{text}: key {key(table, text)}")
    for p in problems[:20]:
        print(p)
    if problems:
        print(f"{len(problems)} problems")
        sys.exit(1)
    print(f"ingress client key: ok ({len(networks)} /64s, 20000 addresses)")


if __name__ == "__main__":
    main()
