//! The `dhv-conform` binary: parse arguments, run the command, exit with its code.

fn main() -> std::process::ExitCode {
    dhv_conform::cli::main()
}
