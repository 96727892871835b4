pub mod art;
