"""The site's association tree in the Slurm replay (issue 51): each account's and user's RawShares, as
`sshare` prints them, weigh Fair Tree and classic fair-share, and `--shares` gives them to the commands."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from metapilot.models.simulator.slurm import parse_shares, parse_slurm_conf, replay_slurm
from metapilot.models.simulator.slurm.replay import associations

# `sshare -a -l -P` of a real Slurm 22.05 (scripts/slurm.sh; bench_slurm_live.py fidelity --accounts 3
# --account-shares 4,2,1), two users of each account kept: an account's name is indented one space a level
SSHARE = """\
Account|User|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS|GrpTRESMins|TRESRunMins
root|||0.000000|0||1.000000||||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0
 root|root|1|0.125000|0|0.000000|0.000000|1.000000|inf||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0
 mpfacct0||4|0.500000|0||0.000000||0.000000||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0
  mpfacct0|mpfid114|1|0.142857|0||0.000000|0.000000|0.000000||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0
  mpfacct0|mpfid120|1|0.142857|0||0.000000|0.000000|0.000000||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0
 mpfacct1||2|0.250000|0||0.000000||0.000000||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0
  mpfacct1|mpfid109|2|0.111111|0||0.000000|0.000000|0.000000||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0
  mpfacct1|mpfid112|2|0.111111|0||0.000000|0.000000|0.000000||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0
 mpfacct2||1|0.125000|0||0.000000||0.000000||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0
  mpfacct2|mpfid125|3|0.111111|0||0.000000|0.000000|0.000000||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0
  mpfacct2|mpfid128|3|0.111111|0||0.000000|0.000000|0.000000||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0
"""

ONE_CPU = parse_slurm_conf("NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1 Default=YES\n"
                           "PriorityType=priority/multifactor\nPriorityWeightFairshare=10000\nPriorityCalcPeriod=1\n"
                           "SchedulerParameters=bf_interval=1\n")


def test_the_tree_as_sshare_prints_it():
    """Accounts (no user), users (account and user), root's own user, root itself passed over; the
    shares as RawShares gives them."""
    tree = parse_shares(SSHARE)
    assert tree.accounts == (("mpfacct0", 4.0), ("mpfacct1", 2.0), ("mpfacct2", 1.0))
    assert ("mpfacct2", "mpfid125", 3.0) in tree.users and len(tree.users) == 6
    assert tree.root_users == (1.0,) and tree.notes == ()


def test_a_deeper_tree_as_sshare_and_sacctmgr_print_it():
    """An account below another: sshare indents it one space more than its parent; sacctmgr names the parent
    (`format=account,user,fairshare,parentname`: `Par Name`). `parent` shares are replayed as one share, as
    the notes say; accounts that are each other's parents, and a line that is not Account|User|shares, are
    refused with the command that prints a tree."""
    indented = parse_shares("Account|User|RawShares\nroot|||\n root|root|1\n phys||10\n  theory||5\n"
                            "   theory|ann|parent\n  phys|bob|2\n")
    named = parse_shares("Account|User|Share|Par Name\nroot||1|\nroot|root|1|\nphys||10|root\ntheory||5|phys\n"
                         "theory|ann|parent|\nphys|bob|2|\n")
    for tree in (indented, named):
        assert tree.accounts == (("phys", 10.0), ("theory", 5.0)) and tree.parents == (("theory", "phys"),)
        assert tree.users == (("phys", "bob", 2.0), ("theory", "ann", 1.0)) and tree.root_users == (1.0,)
        assert any("Fairshare=parent" in n and "theory/ann" in n for n in tree.notes)
    for bad, words in (("Account|User|RawShares\nphys|bob|many\n", "not a number"), ("", "sshare -a -l -P"),
                       ("Account|User|RawShares\nphys|bob\n", "not Account|User|RawShares"),
                       ("Account|User|RawShares\nroot|||\n", "no account or user"),
                       ("Account|User|Share|Par Name\na||1|b\nb||1|a\n", "each other's parents")):
        with pytest.raises(ValueError, match=words):
            parse_shares(bad)


def test_a_tree_of_two_clusters_is_refused_where_they_differ():
    """`sacctmgr show assoc` without `cluster=` lists each association once for every cluster slurmdbd serves:
    the same tree twice reads as once, but where the clusters' shares or parents differ, one would silently
    replace the other, so the read refuses, naming the association and the command for one cluster's tree."""
    one = "phys||10|root\ntheory||5|phys\nphys|bob|2|\n"
    head = "Account|User|Share|Par Name\n"
    assert parse_shares(head + one + one) == parse_shares(head + one)
    for other, words in (("phys||20|root\n", "account phys is given twice, as 10 and 20"),
                         ("phys|bob|3|\n", "user bob in account phys is given twice, as 2 and 3"),
                         ("theory||5|root\n", "account theory is given twice, under phys and under root")):
        with pytest.raises(ValueError, match=words) as err:
            parse_shares(head + one + other)
        assert "cluster=NAME" in str(err.value)


def test_an_account_below_another_is_weighed_under_it():
    """The replay of a deeper tree: account 'phys' (users bob and carl) holds sub-account 'theory' (user ann).
    By 3,600 on one CPU bob ran 2,400 s, ann 1,200 s; carl and ann then wait. Flat (theory a child of root
    beside phys, 1 share each, root's user beside them), theory's 1,200 of 3,600 is the lighter account:
    ann's job goes first. Under phys, phys holds all 3,600 and within it theory (1,200 of 3,600, S 1/2: LF
    1.5) ranks above bob (2,400, S 1/4: LF .375) but below carl (no usage, S 1/4: LF inf): carl's job first."""
    jobs = pl.DataFrame({"job_id": ["1", "2", "3", "4"], "submit": [0.0, 2400.0, 3500.0, 3501.0],
                         "run": [2400.0, 1200.0, 60.0, 60.0], "time_limit": [2400.0, 1200.0, 60.0, 60.0],
                         "cpus": [1] * 4, "nodes": [None] * 4, "partition": [None] * 4,
                         "user": ["bob", "ann", "carl", "ann"], "qos": [None] * 4,
                         "account": ["phys", "theory", "phys", "theory"]},
                        schema_overrides={"nodes": pl.Int64, "partition": pl.Utf8, "qos": pl.Utf8})
    flat = parse_shares("Account|User|RawShares\n root|root|1\n phys||1\n  phys|bob|1\n  phys|carl|1\n"
                        " theory||1\n  theory|ann|1\n")
    deep = parse_shares("Account|User|RawShares\n root|root|1\n phys||1\n  phys|bob|1\n  phys|carl|1\n"
                        "  theory||2\n   theory|ann|1\n")
    assert deep.parents == (("theory", "phys"),)
    assert replay_slurm(jobs, ONE_CPU.with_shares(flat), rule="multifactor")["start"].to_list() == [0, 2400, 3660, 3600]
    assert replay_slurm(jobs, ONE_CPU.with_shares(deep), rule="multifactor")["start"].to_list() == [0, 2400, 3600, 3660]


def test_the_associations_weigh_the_shares_and_count_the_trees_silent_users():
    """Normalised as Slurm does: an account's shares over root's children's (root's user included: 4 + 2 +
    1 + 1), a user's over its account's users'. A user the tree names without jobs still counts among its
    siblings (mpfid120 halves mpfid114's share) and comes after the jobs' associations."""
    tree = parse_shares(SSHARE)
    users = np.array(["mpfid114", "mpfid109"], dtype=object)
    a = associations(users, np.array([0, 1]), pl.Series(["mpfacct0", "mpfacct1"]), tree)
    assert list(a.acct_share) == pytest.approx([4 / 8, 2 / 8, 1 / 8])
    assert len(a.share) == 6 and list(a.share[:2]) == pytest.approx([0.5, 0.5])
    assert list(a.account[:2]) == [0, 1] and list(a.assoc) == [0, 1] and (a.root_users, a.root_first) == (1, 1)


def test_roots_own_jobs_run_in_roots_association():
    """Jobs of user root (in account root or none) ran in root's own user association: it is then the jobs'
    association, not one more beside them. Every job root's, Fair Tree weight 10000: one user association,
    rank 1 of 1, so every job's priority at submission is 10000 (slurmctld's InitPrio on the live runs,
    200 of 200, where counting root's association twice gave 5000 after the first usage); another user's
    jobs count root's association beside theirs (rank 1 of 2 once it has usage, from the recalculation at 60 s
    on: 5000)."""
    frame = pl.DataFrame({"job_id": ["1", "2"], "submit": [0.0, 70.0], "run": [100.0, 10.0],
                          "time_limit": [100.0, 10.0], "cpus": [1, 1], "nodes": [None, None], "partition": [None, None],
                          "user": ["root", "root"], "qos": [None, None], "account": ["root", None]},
                         schema_overrides={"nodes": pl.Int64, "partition": pl.Utf8, "qos": pl.Utf8, "account": pl.Utf8})
    a = associations(np.array(["root"], dtype=object), np.array([0, 0]), frame["account"])
    assert a.root_users == 0 and a.acct_share.tolist() == [1.0] and a.assoc.tolist() == [0, 0]
    assert replay_slurm(frame, ONE_CPU, rule="multifactor")["init_prio"].to_list() == [10000, 10000]
    other = frame.with_columns(pl.lit("ann").alias("user"), pl.lit(None, pl.Utf8).alias("account"))
    assert replay_slurm(other, ONE_CPU, rule="multifactor")["init_prio"].to_list() == [10000, 5000]


def test_the_sites_shares_order_the_accounts_and_a_job_without_one_goes_to_its_users():
    """Accounts 'big' (users a, b) and 'small' (user c) on one CPU; by 3,600 big ran 3,000 s, small 600.
    With equal shares small's level fair-share is higher (its S / U: (1/3) / (1/6) against (1/3) / (5/6)),
    so c's job goes before b's. With big holding 9 shares against small's 1, big's is (9/11) / (5/6) against
    (1/11) / (1/6): b's job goes first. Jobs that name no account run in their user's one account of the
    tree (Slurm's default account), so the tree alone gives the accounted order."""
    jobs = pl.DataFrame({"job_id": ["1", "2", "3", "4"], "submit": [0.0, 3000.0, 3500.0, 3501.0],
                         "run": [3000.0, 600.0, 60.0, 60.0], "time_limit": [3000.0, 600.0, 60.0, 60.0],
                         "cpus": [1] * 4, "nodes": [None] * 4, "partition": [None] * 4, "user": ["a", "c", "b", "c"],
                         "qos": [None] * 4}, schema_overrides={"nodes": pl.Int64, "partition": pl.Utf8, "qos": pl.Utf8})
    accounted = jobs.with_columns(pl.Series("account", ["big", "small", "big", "small"]))
    equal = parse_shares("Account|User|RawShares\n root|root|1\n big||1\n  big|a|1\n  big|b|1\n small||1\n  small|c|1\n")
    heavy = parse_shares("Account|User|RawShares\n root|root|1\n big||9\n  big|a|1\n  big|b|1\n small||1\n  small|c|1\n")

    def starts(frame, tree=None):
        conf = ONE_CPU if tree is None else ONE_CPU.with_shares(tree)
        return replay_slurm(frame, conf, rule="multifactor")["start"].to_list()

    assert starts(accounted) == starts(accounted, equal) == [0, 3000, 3660, 3600]
    assert starts(accounted, heavy) == [0, 3000, 3600, 3660]
    assert starts(jobs) == [0, 3000, 3600, 3660]  # one level of users: b has no usage of its own
    assert starts(jobs, equal) == [0, 3000, 3660, 3600]  # each user's account from the tree


def test_simulate_takes_the_tree_named_as_the_warehouse_names_its_jobs(tmp_path):
    """`simulate --shares`: the tree's names (raw, as sshare prints them) are found in the warehouse by their
    keyed hash (SPEC §8); giving the busiest user of HPC2N's log most of the shares moves the waits; a tree
    that names nobody of the cluster says so; a file that is not a tree is refused."""
    from typer.testing import CliRunner

    from conftest import SHARED_DATA
    from metapilot.cli import app

    swf = SHARED_DATA / "swf" / "HPC2N-subset-3170jobs.swf"
    if not swf.exists():
        pytest.skip("../shared/data is not beside the repository")
    db = str(tmp_path / "w.duckdb")
    assert CliRunner().invoke(app, ["ingest", str(swf), "--db", db]).exit_code == 0
    ids = [ln.split()[11] for ln in swf.read_text().splitlines() if ln.strip() and not ln.startswith(";")]
    busiest = max(set(ids), key=ids.count)  # SWF field 12: the user
    out = tmp_path / "jobs.csv"
    base = ["simulate", "--cluster", "HPC2N-subset-3170jobs", "--policy", "MULTIFACTOR(fairshare=10000,age=10)",
            "--backfill", "slurm", "--jobs-out", str(out), "--db", db]
    r = CliRunner().invoke(app, base)
    assert r.exit_code == 0, r.output
    plain = pl.read_csv(out)["wait"].to_list()
    tree = tmp_path / "shares.txt"
    tree.write_text("Account|User|RawShares\nroot|||\n root|root|1\n hpc||1\n" +
                    "".join(f"  hpc|{u}|{1000 if u == busiest else 1}\n" for u in sorted(set(ids))))
    r = CliRunner().invoke(app, [*base, "--shares", str(tree)])
    assert r.exit_code == 0, r.output
    assert "its shares weigh nobody" not in r.output
    weighed = pl.read_csv(out)["wait"].to_list()
    assert weighed != plain
    other = tmp_path / "other.txt"
    other.write_text("Account|User|RawShares\n root|root|1\n chem||1\n  chem|nobody_here|5\n")
    r = CliRunner().invoke(app, [*base, "--shares", str(other)])
    assert r.exit_code == 0 and "its shares weigh nobody's jobs" in r.output, r.output
    bad = tmp_path / "bad.txt"
    bad.write_text("Account|User|RawShares\nhpc|a|lots\n")
    for args, words in ((["--shares", str(bad)], "not a number of shares"),
                        (["--shares", str(tmp_path / "none.txt")], "sshare -a -l -P > shares.txt")):
        r = CliRunner().invoke(app, [*base, *args])
        assert r.exit_code == 2 and words in r.output, (args, r.output)
    r = CliRunner().invoke(app, ["simulate", "--cluster", "HPC2N-subset-3170jobs", "--shares", str(tree), "--db", db])
    assert r.exit_code == 2 and "add --backfill slurm" in r.output


def test_site_conf_names_the_tree_as_the_warehouse_does(tmp_path):
    """The walk forward's site Slurm (`site_conf`) with `--shares`: the tree's names hashed with the site key
    where the warehouse's jobs carry hashes, as they are where it kept the names."""
    from metapilot.flows.backtest import site_conf
    from metapilot.transforms.privacy import keyed_hash
    from metapilot.warehouse.db import connect

    conf = tmp_path / "slurm.conf"
    conf.write_text("NodeName=n[1-4] CPUs=8\nPartitionName=batch Nodes=n[1-4] Default=YES\n")
    tree = tmp_path / "shares.txt"
    tree.write_text("Account|User|RawShares\n root|root|1\n phys||3\n  phys|ann|2\n")
    key = bytes(range(32))
    (tmp_path / "secret.key").write_text(key.hex() + "\n")
    db = str(tmp_path / "w.duckdb")
    con = connect(db)
    for name in ("ann", keyed_hash("ann", key)):
        con.execute("DELETE FROM jobs")
        con.execute("INSERT INTO jobs (cluster, job_id, source_format, source_file_id, user_id, account_id, "
                    "submit_time, ingested_at) VALUES ('c', '1', 'swf', 'x', ?, ?, now(), now())",
                    [name, "phys" if name == "ann" else keyed_hash("phys", key)])
        site = site_conf(str(conf), None, 0.0, str(tree), con, "c", db)
        assert site.priority.shares.users == (("phys" if name == "ann" else keyed_hash("phys", key), name, 2.0),)
        assert site.priority.shares.root_users == (1.0,)
    con.close()
