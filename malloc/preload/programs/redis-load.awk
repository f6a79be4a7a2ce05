# Writes Redis protocol (RESP) for `redis-cli --pipe`: N rounds of writes to strings,
# lists, hashes, sets, sorted sets and growing strings, all values derived from the
# round number, so the data set (and its DEBUG DIGEST) is the same on every run.
#   LC_ALL=C awk -v n=100000 -f redis-load.awk | redis-cli -p PORT --pipe
function cmd(argc, i) {
  printf "*%d\r\n", argc
  for (i = 1; i <= argc; i++) printf "$%d\r\n%s\r\n", length(a[i]), a[i]
}
BEGIN {
  pad = "abcdefghijklmnopqrstuvwxyz0123456789"
  while (length(pad) < 1200) pad = pad pad
  for (i = 0; i < n; i++) {
    a[1] = "SET"; a[2] = "str:" i; a[3] = "v" i "-" substr(pad, 1, (i * 7919) % 300); cmd(3)
    a[1] = "RPUSH"; a[2] = "list:" (i % 1000); a[3] = "e" i "-" substr(pad, 1, i % 40); cmd(3)
    a[1] = "HSET"; a[2] = "hash:" (i % 2000); a[3] = "f" (i * 31 % 5003); a[4] = "h" i; cmd(4)
    a[1] = "SADD"; a[2] = "set:" (i % 500); a[3] = "m" ((i * 48271) % 100003); cmd(3)
    a[1] = "ZADD"; a[2] = "zset:" (i % 300); a[3] = (i * 69621) % 10007; a[4] = "z" i; cmd(4)
    if (i % 10 == 0) {
      a[1] = "APPEND"; a[2] = "big:" (i / 10 % 50); a[3] = substr(pad, 1 + i % 17, 100 + i % 900); cmd(3)
    }
  }
}
