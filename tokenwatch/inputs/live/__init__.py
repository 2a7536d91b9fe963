"""Live collection: ``tokenwatch watch`` on real nodes, over SSH or on this machine.

``config`` (the YAML) -> ``targets`` (the nodes) -> ``plan`` (each node's sources and parsers) ->
``supervisor.LiveCollector`` (the run: one ``node_runner.NodeRunner`` per node, each its own fault
domain, over ``ssh_connect`` + ``transport``) -> events into the session, as every other collector.
"""
