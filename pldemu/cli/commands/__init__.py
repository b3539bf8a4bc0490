"""One module per ``pldemu`` subcommand (registered in :data:`pldemu.cli.SUBCOMMANDS`); a command
module never imports another: what two commands share lives in ``pldemu.cli.common``,
``pldemu.cli.args``, ``pldemu.cli.check_kinds``, ``pldemu.job`` or ``pldemu.harness``."""
